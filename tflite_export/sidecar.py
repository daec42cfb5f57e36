"""The JSON sidecar next to a .tflite model: labels, input, quantisation (written whole or
not at all)."""

import json
import pathlib

import numpy as np
import tensorflow as tf

from tff_noisy import files
from tflite_export import options

FORMAT_VERSION = 1


def _describe(detail: dict) -> dict:
  scale, zero_point = detail['quantization']
  quantized = bool(scale)  # TFLite writes (0.0, 0) for float tensors.
  return {
      'name': detail['name'],
      'dtype': np.dtype(detail['dtype']).name,
      'shape': detail['shape_signature'].tolist(),
      'scale': float(scale) if quantized else None,
      'zero_point': int(zero_point) if quantized else None,
  }


def quantization_params(tflite_bytes: bytes) -> dict:
  """Dtype, shape, scale and zero point of the model's input/output tensors."""
  interpreter = tf.lite.Interpreter(model_content=tflite_bytes)
  return {
      'inputs': [_describe(d) for d in interpreter.get_input_details()],
      'outputs': [_describe(d) for d in interpreter.get_output_details()],
  }


def sidecar_path(model_path) -> pathlib.Path:
  """``model.tflite`` -> ``model.json``."""
  return pathlib.Path(model_path).with_suffix('.json')


def write_sidecar(path, *, class_names, input_shape, input_dtype,
                  preprocessing: str, quantize: str, quantization_params: dict,
                  config_hash: str) -> pathlib.Path:
  """Writes the sidecar of the model at ``path`` and returns the sidecar's path.

  Args:
    path: the .tflite file; the sidecar goes next to it (``sidecar_path``).
    class_names: label of each logit, in output order.
    input_shape: one example's shape (no batch axis).
    input_dtype: dtype the app feeds, e.g. 'float32' or 'int8'.
    preprocessing: what the app does to raw data before the model, in words.
    quantize: one of ``options.QUANTIZATIONS``.
    quantization_params: ``quantization_params(tflite_bytes)``.
    config_hash: hash of the ExperimentConfig that trained the model.
  """
  options.check_quantize(quantize)
  sidecar = {
      'format_version': FORMAT_VERSION,
      'model_file': pathlib.Path(path).name,
      'class_names': [str(name) for name in class_names],
      'input_shape': [int(d) for d in input_shape],
      'input_dtype': np.dtype(input_dtype).name,
      'preprocessing': preprocessing,
      'quantize': quantize,
      'quantization_params': quantization_params,
      'config_hash': config_hash,
  }
  out = sidecar_path(path)
  files.write_file(str(out), (json.dumps(sidecar, indent=2) + '\n').encode())
  return out


TRAINING_ROUND = (
    'restore(w000..) with the broadcast global weights; for forward correction '
    'prologue(x, y, corrected) over the whole local set (or set_context(matrix, '
    'corrected)); then '
    'local_epochs passes of train(x, y, aggregation_weight) over the local batches '
    '(aggregation_weight: ones unless the server sets per-example weights); then '
    'upload() -> u000.. (update = received - trained) and update_weight, which the '
    'device sends to the server')


def write_training_sidecar(path, tflite_bytes: bytes, *, class_names, input_shape,
                           preprocessing: str, runtime: dict, weights: list,
                           client: dict, config_hash: str) -> pathlib.Path:
  """Writes the sidecar of an on-device training model (``training.py``).

  Args:
    path: the .tflite file; the sidecar goes next to it (``sidecar_path``).
    tflite_bytes: the model (its signatures' inputs and outputs are listed).
    class_names, input_shape, preprocessing: as ``write_sidecar``.
    runtime: ``training.runtime_requirement``: which runtime runs ``train``.
    weights: ``(name, shape, dtype)`` of every ``restore`` input, in order.
    client: the client optimiser, epochs, batch size, weight decay and objective.
    config_hash: hash of the ExperimentConfig the model belongs to.
  """
  interpreter = tf.lite.Interpreter(model_content=tflite_bytes)
  signatures = {name: {'inputs': sorted(io['inputs']), 'outputs': sorted(io['outputs'])}
                for name, io in interpreter.get_signature_list().items()}
  sidecar = {
      'format_version': FORMAT_VERSION,
      'kind': 'on_device_training',
      'model_file': pathlib.Path(path).name,
      'class_names': [str(name) for name in class_names],
      'input_shape': [int(d) for d in input_shape],
      'input_dtype': 'float32',
      'label_dtype': 'int32',
      'preprocessing': preprocessing,
      'signatures': signatures,
      'round': TRAINING_ROUND,
      'weights': [{'name': name, 'shape': [int(d) for d in shape], 'dtype': dtype}
                  for name, shape, dtype in weights],
      'client': client,
      'runtime': runtime,
      'config_hash': config_hash,
  }
  out = sidecar_path(path)
  files.write_file(str(out), (json.dumps(sidecar, indent=2) + '\n').encode())
  return out
