"""TFLite model size and single-example latency per quantisation, against Keras.

Run from the repository root: ``python -m benchmarks.tflite``. For each model
(small_cnn 28x28x1; resnet20 32x32x3 with GroupNorm and, for comparison, with
BatchNorm; the audio CNN on 1 s of 16 kHz audio) it converts every quantisation
mode and times single-example inference: TFLite with
``tf.lite.Interpreter(num_threads=1)`` (set_tensor + invoke + get_tensor, float
input/output for every mode) and, as the reference measured in the same run,
the Keras model called eagerly and through a ``tf.function``, with TensorFlow
limited to one thread too. Weights are untrained (random init, int8 calibrated
on random inputs): size and latency do not depend on them; accuracy is not
measured here. Results go to benchmarks/results/tflite.json.
"""

import argparse
import json
import os
import pathlib
import platform
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

import models  # pylint: disable=g-import-not-at-top
from tflite_export import convert  # pylint: disable=g-import-not-at-top

MODELS = (
    ('small_cnn', (28, 28, 1), {}),
    ('resnet20', (32, 32, 3), {'norm': 'group'}),
    # For comparison: BatchNorm folds into the convs at inference.
    ('resnet20', (32, 32, 3), {'norm': 'batch'}),
    ('audio', (16000,), {}),
)
_OUT = pathlib.Path(__file__).parent / 'results' / 'tflite.json'


def _random_inputs(input_shape: tuple, n: int) -> np.ndarray:
  """Images in [0, 1); audio as 0.1-std noise."""
  rng = np.random.default_rng(0)
  if len(input_shape) == 1:
    return (0.1 * rng.standard_normal((n, *input_shape))).astype(np.float32)
  return rng.random((n, *input_shape), np.float32)


def _median_ms(step, warmup: int, runs: int) -> float:
  for _ in range(warmup):
    step()
  times = []
  for _ in range(runs):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return 1e3 * float(np.median(times))


def _tflite_ms(tflite_bytes: bytes, x: np.ndarray, warmup: int,
               runs: int) -> float:
  interpreter = tf.lite.Interpreter(model_content=tflite_bytes, num_threads=1)
  interpreter.allocate_tensors()
  (input_detail,) = interpreter.get_input_details()
  (output_detail,) = interpreter.get_output_details()

  def step():
    interpreter.set_tensor(input_detail['index'], x)
    interpreter.invoke()
    interpreter.get_tensor(output_detail['index'])

  return _median_ms(step, warmup, runs)


def benchmark(name: str, input_shape: tuple, options: dict, warmup: int,
              runs: int) -> dict:
  """Sizes and median latencies of one model, Keras and every quantisation."""
  tf.keras.utils.set_random_seed(0)
  model = models.build_model(name, input_shape, 10, **options)
  calibration = _random_inputs(input_shape, 100)
  x = calibration[:1]
  function = tf.function(lambda x: model(x, training=False))
  result = {
      'model': name,
      'input_shape': list(input_shape),
      'options': options,
      'params': model.count_params(),
      'keras_float32_bytes': 4 * model.count_params(),
      'keras_eager_ms': _median_ms(lambda: model(x, training=False), warmup,
                                   runs),
      'keras_function_ms': _median_ms(lambda: function(x), warmup, runs),
      'tflite': {},
  }
  for quantize in convert.QUANTIZATIONS:
    tflite_bytes = convert.convert_keras(model, quantize, calibration)
    ms = _tflite_ms(tflite_bytes, x, warmup, runs)
    result['tflite'][quantize] = {
        'bytes': len(tflite_bytes),
        'median_ms': ms,
        'speedup_vs_keras_eager': result['keras_eager_ms'] / ms,
        'speedup_vs_keras_function': result['keras_function_ms'] / ms,
    }
  return result


def _cpu_name() -> str:
  try:
    for line in pathlib.Path('/proc/cpuinfo').read_text().splitlines():
      if line.startswith('model name'):
        return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.machine()


def _table(results: list) -> str:
  lines = [f"{'model':<15}{'quantize':<9}{'bytes':>11}{'median ms':>11}"
           f"{'x eager':>9}{'x tf.function':>15}"]
  for r in results:
    name = '_'.join([r['model'], *r['options'].values()])
    lines.append(f"{name:<15}{'keras':<9}{r['keras_float32_bytes']:>11,}"
                 f"{r['keras_eager_ms']:>11.3f} eager, "
                 f"{r['keras_function_ms']:.3f} tf.function")
    for quantize, t in r['tflite'].items():
      lines.append(f"{name:<15}{quantize:<9}{t['bytes']:>11,}"
                   f"{t['median_ms']:>11.3f}{t['speedup_vs_keras_eager']:>9.1f}"
                   f"{t['speedup_vs_keras_function']:>15.1f}")
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--runs', type=int, default=300)
  parser.add_argument('--warmup', type=int, default=30)
  parser.add_argument('--out', type=pathlib.Path, default=_OUT)
  args = parser.parse_args(argv)
  # The same single thread for Keras as for the interpreter.
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  load_before = os.getloadavg()[0]
  results = [benchmark(name, shape, options, args.warmup, args.runs)
             for name, shape, options in MODELS]
  report = {
      'machine': {'processor': _cpu_name(),
                  'cpus': os.cpu_count(), 'python': platform.python_version(),
                  'tensorflow': tf.__version__,
                  # Other work on the machine inflates latencies.
                  'load_average_1min': [load_before, os.getloadavg()[0]]},
      'settings': {'runs': args.runs, 'warmup': args.warmup, 'num_threads': 1,
                   'weights': 'untrained (random init)'},
      'results': results,
  }
  args.out.parent.mkdir(parents=True, exist_ok=True)
  args.out.write_text(json.dumps(report, indent=2) + '\n')
  print(_table(results))
  print(f'wrote {args.out}')


if __name__ == '__main__':
  main()
