"""Exports the final global model of a finished run to TFLite, with its sidecar.

  tff-noisy export RUN_DIR [--quantize none|float16|dynamic|int8]
      [--out model.tflite] [--representative-size N] [--integer-io] [--verify]

The model is rebuilt from the run's ``results.json`` config and loaded with its
``final_weights.npz``. The federated data is rebuilt from the same config (or
loaded from its cache): int8 calibrates on a seeded sample of the clients'
training inputs, and ``--verify`` compares TFLite with Keras on the test split.
TensorFlow is imported only when a model is exported, so the CLI stays quick.
"""

import os
from typing import Optional

import numpy as np

from tff_noisy.errors import PROG
from tflite_export import options


_AUDIO = ('mono 16 kHz waveform of {samples} samples, float32 in [-1, 1] '
          '(16-bit PCM / 32768), zero-padded or cut to length; resample other '
          'rates first (tff_noisy.data.keywords.resample_to_16k). The log-mel '
          'front end is inside the model.')
_IMAGE = ('image of shape {shape} (height, width, channels), float32 pixels '
          'scaled to [0, 1] (8-bit / 255; scikit-learn digits 0..16 / 16).')


def _preprocessing(input_shape) -> str:
  """What an app does to raw audio or pixels before feeding the model."""
  if len(input_shape) == 1:
    return _AUDIO.format(samples=input_shape[0])
  return _IMAGE.format(shape=tuple(input_shape))


def export_run(run_dir: str, quantize: str = 'none',
               out: Optional[str] = None, representative_size: int = 200,
               integer_io: bool = False, verify: bool = False) -> dict:
  """Writes the run's final model as .tflite and its sidecar; returns a report.

  Args:
    run_dir: output directory of a finished ``tff-noisy run``.
    quantize: one of ``options.QUANTIZATIONS``.
    out: the .tflite path (default ``RUN_DIR/model_<quantize>.tflite``); the
      sidecar goes next to it (``sidecar.sidecar_path``).
    representative_size: int8 only: training inputs that calibrate (>= 1).
    integer_io: int8 only: int8 input and output tensors.
    verify: also run both models on the test split.

  Returns:
    ``model``, ``sidecar``, ``bytes``, ``quantize``, ``config_hash`` and, with
    ``verify``, ``agreement``, ``keras_accuracy``, ``tflite_accuracy``, ``n``
    (see ``verify.verify``).

  Raises:
    FileNotFoundError: ``run_dir`` has no results.json or final_weights.npz.
    UserError: final_weights.npz cannot be read.
    ValueError: options ``convert_keras`` refuses (checked before any work, before
      TensorFlow is imported).
  """
  options.check_options(quantize, representative_size, integer_io)
  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import driver
  from tflite_export import convert
  from tflite_export import sidecar
  from tflite_export import verify as verify_lib
  # pylint: enable=g-import-not-at-top
  results, _, data, model = driver.load_finished_run(run_dir)
  train_x = (np.concatenate([data.x[c] for c in data.client_ids])
             if quantize == 'int8' else None)
  tflite_bytes = convert.convert_keras(model, quantize, train_x,
                                       representative_size, integer_io)
  path = out or os.path.join(run_dir, f'model_{quantize}.tflite')
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, 'wb') as f:
    f.write(tflite_bytes)
  sidecar_file = sidecar.write_sidecar(
      path, class_names=data.class_names, input_shape=data.input_shape,
      input_dtype='int8' if integer_io else 'float32',
      preprocessing=_preprocessing(data.input_shape), quantize=quantize,
      quantization_params=sidecar.quantization_params(tflite_bytes),
      config_hash=results['data_hash'])
  report = {'model': str(path), 'sidecar': str(sidecar_file),
            'bytes': len(tflite_bytes), 'quantize': quantize,
            'config_hash': results['data_hash']}
  if verify:
    report.update(
        verify_lib.verify(model, tflite_bytes, data.x_test, data.y_test))
  return report


def _format_report(report: dict) -> str:
  """``export_run``'s report in one or two lines."""
  lines = [f'{report["model"]}: {report["bytes"]:,} bytes '
           f'({report["quantize"]}), sidecar {report["sidecar"]}']
  if 'agreement' in report:
    lines.append(f'on {report["n"]} test examples: top-1 agreement with Keras '
                 f'{report["agreement"]:.4f}, accuracy Keras '
                 f'{report["keras_accuracy"]:.4f}, '
                 f'TFLite {report["tflite_accuracy"]:.4f}')
  return '\n'.join(lines)


def _cmd_export(args, parser) -> None:
  try:
    report = export_run(args.run_dir, args.quantize, args.out,
                        args.representative_size, args.integer_io, args.verify)
  except ValueError as e:  # Options refused, or weights that fit no model.
    parser.exit(2, f'{PROG}: error: {e}\n')
  print(_format_report(report))


def add_export_command(subparsers) -> None:
  """Registers ``export`` on the ``tff-noisy`` CLI's subparsers."""
  parser = subparsers.add_parser('export',
                                 help='export a finished run to TFLite')
  parser.add_argument('run_dir', metavar='RUN_DIR',
                      help='--out directory of a finished run')
  parser.add_argument('--quantize', default='none', metavar='MODE',
                      help='none (float32) | float16 | dynamic | int8 '
                      '(default: none)')
  parser.add_argument('--out', metavar='FILE',
                      help='the .tflite file (default: RUN_DIR/model_<quantize>'
                      '.tflite); the .json sidecar goes next to it')
  parser.add_argument('--representative-size', type=int, default=200,
                      metavar='N',
                      help='int8: training inputs that calibrate '
                      '(default: 200)')
  parser.add_argument('--integer-io', action='store_true',
                      help='int8: int8 input and output tensors, not float32')
  parser.add_argument('--verify', action='store_true',
                      help='report top-1 agreement with Keras and both test '
                      'accuracies')
  parser.set_defaults(func=lambda args: _cmd_export(args, parser))
