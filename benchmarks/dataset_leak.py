"""Resident memory kept per ``tf.data`` dataset built in eager mode, per pipeline stage.

The ``tff`` runtime used to build every sampled client's ``ClientData.dataset()``
(``from_tensor_slices``, then ``shuffle``, then ``batch``) in the driver each round and
hand it to TFF; it now hands TFF the client's arrays and TFF builds the pipeline in its
graph. What an eager pipeline keeps still matters wherever one is built per client
(the ``tf`` runtime's one-call-per-client path, the methods' probes). This script builds ``--datasets`` such pipelines one after another (each
dropped at once), after ``--warmup`` untimed ones, and reports the growth of the process's
resident memory (``VmRSS``) per dataset built and, in a second child process per stage, of
what Python's ``tracemalloc`` sees (tracing keeps a traceback per live allocation, so a
traced process's resident memory grows several times more: the two are never measured in
one process). Pure TensorFlow, no TFF: a growth here is TensorFlow's (it was a part of
the driver's growth on ``tff`` in ``soak.py``).

  .venv/bin/python benchmarks/dataset_leak.py [--datasets 6000] [--warmup 300]

Writes benchmarks/results/dataset_leak.json.
"""

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(__file__))

from soak import rss_bytes  # pylint: disable=g-import-not-at-top,wrong-import-position

RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'dataset_leak.json')
_ROOT = os.path.join(os.path.dirname(__file__), '..')
STAGES = ('from_tensor_slices', 'range', 'range_batch', 'range_shuffle', 'client_dataset',
          'range_shuffle_new_int_seeds', 'client_dataset_new_seeds')


def measure(stage: str, datasets: int, warmup: int, traced: bool) -> dict:
  """Builds ``warmup`` then ``datasets`` datasets of ``stage`` in this process; the growth
  of its resident memory, or with ``traced`` of Python's traced memory."""
  import gc  # pylint: disable=g-import-not-at-top
  import tracemalloc  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sys.path.insert(0, _ROOT)
  from tff_noisy.federated import client_data  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  client = client_data.make_client_data(rng.random((20, 64), np.float32),
                                        rng.integers(10, size=20), 10, 7)
  seeds = itertools.count(1000)  # A new seed per dataset, as each client and round gets.
  build = {
      'from_tensor_slices': lambda: tf.data.Dataset.from_tensor_slices(client.features),
      'range': lambda: tf.data.Dataset.range(20),
      'range_batch': lambda: tf.data.Dataset.range(20).batch(10),
      'range_shuffle': lambda: tf.data.Dataset.range(20).shuffle(20, seed=7),
      'client_dataset': client.dataset,
      # A Python int seed: TensorFlow caches the eager tensor of each new scalar.
      'range_shuffle_new_int_seeds':
          lambda: tf.data.Dataset.range(20).shuffle(20, seed=next(seeds)),
      'client_dataset_new_seeds':
          lambda: client._replace(shuffle_seed=next(seeds)).dataset(),
  }[stage]
  for _ in range(warmup):
    build()
  gc.collect()
  if traced:
    tracemalloc.start()
  measured = tracemalloc.get_traced_memory()[0] if traced else rss_bytes()
  for _ in range(datasets):
    build()
  gc.collect()
  growth = (tracemalloc.get_traced_memory()[0] if traced else rss_bytes()) - measured
  if traced:
    return {'python_traced_bytes_per_dataset': growth / datasets}
  return {'stage': stage, 'datasets': datasets, 'warmup': warmup,
          'rss_growth_bytes': growth, 'rss_bytes_per_dataset': growth / datasets}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--datasets', type=int, default=6000, help='datasets built per stage')
  parser.add_argument('--warmup', type=int, default=300, help='built first, not counted')
  parser.add_argument('--out', default=RESULTS)
  parser.add_argument('--one', choices=STAGES, help=argparse.SUPPRESS)  # Child: one stage.
  parser.add_argument('--traced', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.datasets < 1 or args.warmup < 0:
    parser.error('--datasets: at least 1; --warmup: at least 0')
  if args.one:
    print(json.dumps(measure(args.one, args.datasets, args.warmup, args.traced)))
    return
  rows = []
  for stage in STAGES:
    row = {}
    for traced in ([], ['--traced']):
      child = subprocess.run(
          [sys.executable, __file__, '--one', stage, '--datasets', str(args.datasets),
           '--warmup', str(args.warmup), *traced], cwd=_ROOT, stdout=subprocess.PIPE,
          text=True, check=True)
      row.update(json.loads(child.stdout.strip().splitlines()[-1]))
    rows.append(row)
    print(f'{stage:>27}: {rows[-1]["rss_bytes_per_dataset"]:8.0f} B resident, '
          f'{rows[-1]["python_traced_bytes_per_dataset"]:6.0f} B Python, per dataset')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, 'w') as f:
    json.dump({'stages': rows, 'tensorflow': tf.__version__,
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform(),
                           'python': platform.python_version()}}, f, indent=1)


if __name__ == '__main__':
  main()
