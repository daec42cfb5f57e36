"""Exports the final global model of a finished run to TFLite, with its sidecar.

  tff-noisy export RUN_DIR [--quantize none|float16|dynamic|int8]
      [--out model.tflite] [--representative-size N] [--integer-io] [--verify]
  tff-noisy export RUN_DIR|CONFIG.yaml --on-device-training [--out client.tflite]

``--on-device-training`` writes the run's *client round* instead (``tflite_export.training``):
signatures ``restore``, ``train``, ``upload``, ``parameters``, ``infer`` (and
``prologue``/``set_context`` for forward correction) with the run's client optimiser,
objective, local epochs and weight decay, starting from the run's final weights, or from
a config's seeded initial weights (the driver's) for a model not trained yet.

The model is rebuilt from the run's ``results.json`` config and loaded with its
``final_weights.npz``. The federated data is rebuilt from the same config (or
loaded from its cache): int8 calibrates on a seeded sample of the clients'
training inputs, and ``--verify`` compares TFLite with Keras on the test split.
TensorFlow is imported only when a model is exported, so the CLI stays quick.
"""

import os
from typing import Optional

from tff_noisy import files
from tff_noisy import native_log
from tff_noisy.errors import PROG
from tff_noisy.simulation import run_dir as run_dir_lib
from tflite_export import options


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
    UserError: final_weights.npz cannot be read; or (``OutputError``) a file cannot be
      written: a full disk, a read-only file system.
    ValueError: options ``convert_keras`` refuses (checked before any work, before
      TensorFlow is imported).
  """
  options.check_options(quantize, representative_size, integer_io)
  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import assembly
  from tflite_export import export
  # pylint: enable=g-import-not-at-top
  results, _, data, model = assembly.load_finished_run(run_dir)
  return export.export_model(
      model, data, out or os.path.join(run_dir, f'model_{quantize}.tflite'),
      config_hash=results['data_hash'], quantize=quantize,
      representative_size=representative_size, integer_io=integer_io, verify=verify)


def client_setup(config, data):
  """``(model_fn, ClientProgram, client optimizer)`` the config's clients train with."""
  from tff_noisy.simulation import assembly  # pylint: disable=g-import-not-at-top
  setup, program = assembly.client_program(config, data)
  return setup.model_fn, program, setup.client_optimizer


@native_log.quietly  # The converter's and the interpreter's routine lines.
def export_on_device(source: str, out: Optional[str] = None) -> dict:
  """Writes a run's (or a config's) client round as an on-device training model.

  Args:
    source: a finished run's directory (its final weights), or a YAML config (the
      driver's seeded initial weights: ``tf.keras.utils.set_random_seed(seed)``).
    out: the .tflite path (default ``RUN_DIR/client_training.tflite``, or next to the
      config); the sidecar goes next to it.

  Returns:
    ``model``, ``sidecar``, ``bytes``, ``select_tf_ops``, ``signatures``.

  Raises:
    FileNotFoundError: a run directory without results.json or final_weights.npz.
    ConfigError: client parts or a model that cannot train on a device (names it).
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from tff_noisy import config as config_lib
  from tff_noisy.data import federated as federated_data
  from tff_noisy.simulation import assembly
  from tflite_export import export
  from tflite_export import sidecar
  from tflite_export import training
  # pylint: enable=g-import-not-at-top
  if os.path.isfile(source):
    config = config_lib.load(source)
    data = federated_data.build_federated_data(config)
    model_fn, program, optimizer = client_setup(config, data)
    training.check_program(program)  # Before any model is built.
    tf.keras.utils.set_random_seed(config.seed)
    model = model_fn()
    default = os.path.join(os.path.dirname(os.path.abspath(source)),
                           'client_training.tflite')
    config_hash = config.data_hash()
  else:
    results, config, data, model = assembly.load_finished_run(source)
    _, program, optimizer = client_setup(config, data)
    default = os.path.join(source, 'client_training.tflite')
    config_hash = results['data_hash']
  module = training.build_training_module(
      model, program, optimizer, local_epochs=config.fl.local_epochs,
      weight_decay=config.fl.weight_decay)
  tflite_bytes = training.convert_training_module(module)
  path = out or default
  files.write_file(path, tflite_bytes)
  runtime = training.runtime_requirement(tflite_bytes)
  sidecar_file = sidecar.write_training_sidecar(
      path, tflite_bytes, class_names=data.class_names, input_shape=data.input_shape,
      preprocessing=export.preprocessing(data.input_shape), runtime=runtime,
      weights=[(training.weight_name(i), v.shape, v.dtype.name)
               for i, v in enumerate(module.all_variables)],
      client={'optimizer': config.fl.client_optimizer, 'lr': config.fl.client_lr,
              'momentum': config.fl.momentum, 'local_epochs': config.fl.local_epochs,
              'batch_size': config.fl.batch_size, 'weight_decay': config.fl.weight_decay,
              'method': config.method.name,
              'objective': training.describe_program(program)},
      config_hash=config_hash)
  return {'model': str(path), 'sidecar': str(sidecar_file), 'bytes': len(tflite_bytes),
          'select_tf_ops': runtime['select_tf_ops'],
          'signatures': sorted(module.signatures())}


def _format_report(report: dict) -> str:
  """``export_run``'s report in one or two lines."""
  if 'signatures' in report:
    needs = ('the select-TF-ops runtime (full TensorFlow tf.lite.Interpreter or Android '
             'with tensorflow-lite-select-tf-ops)' if report['select_tf_ops']
             else 'TFLite builtins only')
    return (f'{report["model"]}: {report["bytes"]:,} bytes, on-device training model '
            f'(signatures {", ".join(report["signatures"])}; needs {needs}), sidecar '
            f'{report["sidecar"]}')
  lines = [f'{report["model"]}: {report["bytes"]:,} bytes '
           f'({report["quantize"]}), sidecar {report["sidecar"]}']
  if 'agreement' in report:
    lines.append(f'on {report["n"]} test examples: top-1 agreement with Keras '
                 f'{report["agreement"]:.4f}, accuracy Keras '
                 f'{report["keras_accuracy"]:.4f}, '
                 f'TFLite {report["tflite_accuracy"]:.4f}')
  return '\n'.join(lines)


def _cmd_export(args, parser) -> None:
  if os.path.isdir(args.run_dir):
    run_dir_lib.refuse_if_running(args.run_dir, 'export')
  if args.on_device_training:
    refused = [flag for flag, on in (('--quantize', args.quantize != 'none'),
                                     ('--integer-io', args.integer_io),
                                     ('--verify', args.verify)) if on]
    if refused:
      parser.exit(2, f'{PROG}: error: {", ".join(refused)}: not with '
                  '--on-device-training (the training model is float32)\n')
    try:
      report = export_on_device(args.run_dir, args.out)
    except ValueError as e:
      parser.exit(2, f'{PROG}: error: {e}\n')
    print(_format_report(report))
    return
  if os.path.isfile(args.run_dir):
    parser.exit(2, f'{PROG}: error: {args.run_dir} is a file: export takes a run '
                'directory (a config only with --on-device-training)\n')
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
                      help='--out directory of a finished run (with '
                      '--on-device-training also a YAML config: its initial model)')
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
  parser.add_argument('--on-device-training', action='store_true',
                      help='export the client\'s round (restore, train, upload, '
                      'parameters, infer signatures) with the run\'s client optimiser '
                      'and objective, for devices that train (float32; needs a runtime '
                      'with select TF ops when the sidecar says so)')
  parser.set_defaults(func=lambda args: _cmd_export(args, parser))
