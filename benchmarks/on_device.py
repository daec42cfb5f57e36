"""On-device training models: size, ``train`` latency, a client's round, parity with TFF.

Run from the repository root: ``python -m benchmarks.on_device [--models mlp,small_cnn]``.
For each model it exports the on-device training model (``tflite_export/training.py``:
FedAvg's cross-entropy, SGD lr 0.05, one local epoch, batch 32) and measures, for one
client of 128 examples:

- ``bytes``: the training model's size; ``flex_ops``: the select TF ops it needs;
- ``train_ms``: median latency of one ``train`` call (a batch of 32) in
  ``tf.lite.Interpreter`` (the full TensorFlow pip's, which links the select-TF-ops
  delegate), TFLite's default threads;
- ``round_s``: the client's whole round through the interpreter (restore, 4 x ``train``,
  upload), median of 3;
- ``tff_round_s``: the same client's round through the TFF client work
  (``process.train`` on that one client, tracing excluded: median of 3 calls after a
  first one), and ``tff_first_call_s`` (with tracing);
- ``parity``: |update_tflite - update_tff| / |update_tff| for that round. Models with
  dropout (``mnist_cnn``, ``audio``) are compared with every dropout rate set to 0 in both
  (their random streams differ); the mlp is also measured with tanh. ``audio``'s ~4e-2 is
  float32 rounding at ReLU and max-pool kinks, grown over the round's steps
  (``benchmarks/audio_parity.py``).

Weights are untrained (seeded init), inputs random (images in [0, 1), audio 0.1-std
noise), labels random: latency and parity do not depend on them. The machine is shared
(2 cores), so times are indicative. Results go to benchmarks/results/on_device.json.
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
from tff_noisy.federated import client_data as client_data_lib  # pylint: disable=g-import-not-at-top
from tff_noisy.federated import process as process_lib  # pylint: disable=g-import-not-at-top
from tff_noisy.tff_runtime import import_tff  # pylint: disable=g-import-not-at-top
from tflite_export import device_client  # pylint: disable=g-import-not-at-top
from tflite_export import training  # pylint: disable=g-import-not-at-top

tff = import_tff()
# (label, model name, input shape, options, activation override)
MODELS = {
    'mlp': ('mlp', (8, 8, 1), {}, None),
    'mlp_tanh': ('mlp', (8, 8, 1), {}, 'tanh'),
    'small_cnn': ('small_cnn', (28, 28, 1), {}, None),
    'mnist_cnn': ('mnist_cnn', (28, 28, 1), {}, None),
    'audio': ('audio', (16000,), {}, None),
}
_OUT = pathlib.Path(__file__).parent / 'results' / 'on_device.json'
_EXAMPLES, _BATCH, _LR = 128, 32, 0.05


def _model_fn(name, shape, options, activation):
  def build():
    model = models.build_model(name, shape, 10, **options)
    for layer in model.layers:
      if isinstance(layer, tf.keras.layers.Dropout):
        layer.rate = 0.0  # Dropout off on both sides: parity without random streams.
      if activation and isinstance(layer, tf.keras.layers.Dense) and layer.name != 'logits':
        layer.activation = tf.keras.activations.get(activation)
    return model
  return build


def _inputs(shape, n):
  rng = np.random.default_rng(0)
  if len(shape) == 1:
    x = (0.1 * rng.standard_normal((n, *shape))).astype(np.float32)
  else:
    x = rng.random((n, *shape), np.float32)
  return x, rng.integers(0, 10, n)



def relative_gap(got, want) -> float:
  """|got - want| / |want| over lists of arrays (float64 sums): the parity measure."""
  diff = sum(np.sum((np.float64(a) - b)**2) for a, b in zip(got, want))
  return float(np.sqrt(diff / sum(np.sum(np.float64(b)**2) for b in want)))

def _median(values):
  return float(np.median(values))


def measure(label: str) -> dict:
  name, shape, options, activation = MODELS[label]
  model_fn = _model_fn(name, shape, options, activation)
  optimizer = tff.learning.optimizers.build_sgdm(_LR)
  tf.keras.utils.set_random_seed(0)
  model = model_fn()
  began = time.perf_counter()
  module = training.build_training_module(model, None, optimizer)
  tflite_bytes = training.convert_training_module(module)
  convert_s = time.perf_counter() - began
  runtime = training.runtime_requirement(tflite_bytes)
  x, y = _inputs(shape, _EXAMPLES)
  client_data = client_data_lib.make_client_data(x, y, _BATCH, 0)
  dataset = client_data.dataset()
  weights = tff.learning.models.ModelWeights(
      trainable=[v.numpy() for v in model.trainable_variables],
      non_trainable=[v.numpy() for v in model.non_trainable_variables])
  flat = list(weights.trainable) + list(weights.non_trainable)

  client = device_client.DeviceClient(tflite_bytes)
  batches = list(dataset.as_numpy_iterator())
  client.restore(flat)
  train_ms = []
  for batch in batches * 3:
    began = time.perf_counter()
    client.train(batch['x'], batch['y'])
    train_ms.append(1000 * (time.perf_counter() - began))
  round_s, upload = [], None
  for _ in range(3):
    began = time.perf_counter()
    upload = client.run_round(flat, batches)
    round_s.append(time.perf_counter() - began)

  process = process_lib.build_process(model_fn, dataset.element_spec, optimizer)
  hparams = process.get_hparams(process.initialize())
  began = time.perf_counter()
  results, _, _ = process.train_clients(weights, hparams, [client_data], [()])
  tff_first = time.perf_counter() - began
  tff_s = []
  for _ in range(3):
    began = time.perf_counter()
    results, _, _ = process.train_clients(weights, hparams, [client_data], [()])
    tff_s.append(time.perf_counter() - began)
  reference = list(results[0].update.trainable) + list(results[0].update.non_trainable)
  record = {
      'model': name, 'input_shape': list(shape), 'activation': activation or 'default',
      'dropout_off_for_parity': any(isinstance(l, tf.keras.layers.Dropout)
                                    for l in model.layers),
      'parameters': int(sum(np.prod(v.shape) for v in model.variables)),
      'bytes': len(tflite_bytes), 'convert_s': round(convert_s, 1),
      'select_tf_ops': runtime['select_tf_ops'], 'flex_ops': runtime['flex_ops'],
      'train_ms': round(_median(train_ms), 2), 'round_s': round(_median(round_s), 4),
      'tff_round_s': round(_median(tff_s), 4), 'tff_first_call_s': round(tff_first, 2),
      'parity': relative_gap(upload.update, reference),
      'update_weight': upload.update_weight,
      'tff_update_weight': float(results[0].update_weight),
  }
  print(json.dumps({label: record}), flush=True)
  return record


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--models', default=','.join(MODELS),
                      help=f'comma-separated, of {", ".join(MODELS)}')
  args = parser.parse_args()
  results = json.loads(_OUT.read_text()) if _OUT.exists() else {}
  results.setdefault('models', {})
  for label in args.models.split(','):
    results['models'][label] = measure(label)
  results['setup'] = {
      'examples': _EXAMPLES, 'batch_size': _BATCH, 'local_epochs': 1,
      'optimizer': f'sgd lr {_LR}', 'objective': 'cross-entropy',
      'tensorflow': tf.__version__, 'machine': platform.machine(),
      'cpus': os.cpu_count(), 'note': 'shared 2-core machine: times are indicative'}
  _OUT.write_text(json.dumps(results, indent=2) + '\n')


if __name__ == '__main__':
  main()
