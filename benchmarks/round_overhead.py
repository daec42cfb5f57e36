"""One FedAvg round over K clients vs one Keras ``fit`` epoch over the same examples.

Same model (small_cnn), batch size, optimizer (SGD) and examples, in one process; the
ratio is the median over repeats after one warm-up each. Target: <= 1.15 for
10 clients x 600 examples. Writes benchmarks/results/round_overhead.json.

  .venv/bin/python benchmarks/round_overhead.py [--clients 10] [--per-client 600]
"""

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

import models  # pylint: disable=g-import-not-at-top
from tff_noisy.data import sources  # pylint: disable=g-import-not-at-top
from tff_noisy.federated import process as process_lib  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
from tff_noisy.tff_runtime import import_tff  # pylint: disable=g-import-not-at-top

RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'round_overhead.json')


def _data(total):
  try:
    data = sources.load_dataset('fashion_mnist')
    return 'fashion_mnist', data.x_train[:total], data.y_train[:total]
  except sources.DatasetError:
    rng = np.random.default_rng(0)  # Timing only: the pixel values do not matter.
    return 'random 28x28 (fashion_mnist not installed)', rng.random(
        (total, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, total)


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--clients', type=int, default=10)
  parser.add_argument('--per-client', type=int, default=600)
  parser.add_argument('--batch-size', type=int, default=32)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  tff = import_tff()
  total = args.clients * args.per_client
  source, x, y = _data(total)
  model_fn = lambda: models.build_model('small_cnn', x.shape[1:], 10)
  lr = 0.05

  def datasets():
    return [driver.client_dataset(x[i::args.clients], y[i::args.clients], args.batch_size, i)
            for i in range(args.clients)]

  process = process_lib.build_process(
      model_fn, datasets()[0].element_spec, tff.learning.optimizers.build_sgdm(lr))
  keras_model = model_fn()
  keras_model.compile(optimizer=tf.keras.optimizers.SGD(lr),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  state = process.initialize()

  def fedavg_round():
    nonlocal state
    state = process.next(state, datasets(), [()] * args.clients).state

  def keras_epoch():
    keras_model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=True, verbose=0)

  def timed(fn):
    fn()  # Warm-up: tracing and the TFF worker start are not per-round costs.
    times = []
    for _ in range(args.repeats):
      start = time.perf_counter()
      fn()
      times.append(time.perf_counter() - start)
    return statistics.median(times)

  keras_seconds = timed(keras_epoch)
  round_seconds = timed(fedavg_round)
  ratio = round_seconds / keras_seconds
  record = {
      'clients': args.clients, 'per_client': args.per_client, 'batch_size': args.batch_size,
      'repeats': args.repeats, 'data': source, 'model': 'small_cnn',
      'keras_epoch_seconds': keras_seconds, 'fedavg_round_seconds': round_seconds,
      'ratio': ratio, 'target': 1.15, 'machine': f'{platform.machine()}, {os.cpu_count()} cores',
      'load_average_1min': os.getloadavg()[0],
  }
  os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
  with open(RESULTS, 'w') as f:
    json.dump(record, f, indent=1)
  print(f'keras epoch {keras_seconds:.2f}s  fedavg round {round_seconds:.2f}s  '
        f'ratio {ratio:.3f} (target <= 1.15)')


if __name__ == '__main__':
  main()
