"""A trained Keras model as a .tflite file with its sidecar, optionally verified: what
``tff-noisy export`` (a finished run's directory) and ``tff_noisy.export`` (a run's
``Results`` from Python) share. Both files are written whole or not at all."""

import os

import numpy as np
import tensorflow as tf

from tff_noisy import files
from tff_noisy import native_log
from tff_noisy.data.federated import FederatedData
from tflite_export import convert
from tflite_export import sidecar
from tflite_export import verify as verify_lib

_AUDIO = ('mono 16 kHz waveform of {samples} samples, float32 in [-1, 1] '
          '(16-bit PCM / 32768), zero-padded or cut to length; resample other '
          'rates first (tff_noisy.data.keywords.resample_to_16k). The log-mel '
          'front end is inside the model.')
_IMAGE = ('image of shape {shape} (height, width, channels), float32 pixels '
          'scaled to [0, 1] (8-bit / 255; scikit-learn digits 0..16 / 16).')
_GIVEN = ('float32 inputs of shape {shape} per example, prepared as those the model '
          'trained on (given in Python to tff_noisy.federated_data).')


def preprocessing(input_shape, given_in_python: bool = False) -> str:
  """What an app does to raw audio or pixels before feeding the model; for data given in
  Python, what the user did to theirs."""
  if given_in_python:
    return _GIVEN.format(shape=tuple(input_shape))
  if len(input_shape) == 1:
    return _AUDIO.format(samples=input_shape[0])
  return _IMAGE.format(shape=tuple(input_shape))


@native_log.quietly  # The converter's and the interpreter's routine lines.
def export_model(model: tf.keras.Model, data: FederatedData, path: str, *,
                 config_hash: str, quantize: str = 'none', representative_size: int = 200,
                 integer_io: bool = False, verify: bool = False,
                 given_in_python: bool = False) -> dict:
  """Writes ``model`` (trained on ``data``) as the .tflite file ``path`` and its sidecar
  beside it (``sidecar.sidecar_path``); returns a report.

  Args:
    model: the trained model, logits out.
    data: what it trained on: int8 calibrates on a seeded sample of its clients'
      training inputs, ``verify`` runs on its test split; the sidecar names its classes
      and input shape.
    path: the .tflite file (its folder is created if missing).
    config_hash: the run's ``data_hash``, recorded in the sidecar.
    quantize, representative_size, integer_io: ``convert.convert_keras``'s options.
    verify: also run both models on the test split.
    given_in_python: ``data`` was given in Python (the sidecar's preprocessing says so).

  Returns:
    ``model``, ``sidecar``, ``bytes``, ``quantize``, ``config_hash`` and, with
    ``verify``, ``agreement``, ``keras_accuracy``, ``tflite_accuracy``, ``n``
    (see ``verify.verify``).

  Raises:
    OutputError: a file cannot be written (a full disk, a read-only file system).
  """
  train_x = (np.concatenate([data.x[c] for c in data.client_ids])
             if quantize == 'int8' else None)
  tflite_bytes = convert.convert_keras(model, quantize, train_x, representative_size,
                                       integer_io)
  files.write_file(os.fspath(path), tflite_bytes)
  sidecar_file = sidecar.write_sidecar(
      path, class_names=data.class_names, input_shape=data.input_shape,
      input_dtype='int8' if integer_io else 'float32',
      preprocessing=preprocessing(data.input_shape, given_in_python), quantize=quantize,
      quantization_params=sidecar.quantization_params(tflite_bytes),
      config_hash=config_hash)
  report = {'model': str(path), 'sidecar': str(sidecar_file), 'bytes': len(tflite_bytes),
            'quantize': quantize, 'config_hash': config_hash}
  if verify:
    report.update(verify_lib.verify(model, tflite_bytes, data.x_test, data.y_test))
  return report
