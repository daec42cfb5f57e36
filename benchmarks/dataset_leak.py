"""Resident memory kept per ``tf.data`` dataset built in eager mode, per pipeline stage.

The ``tff`` runtime builds every sampled client's ``ClientData.dataset()``
(``from_tensor_slices``, then ``shuffle``, then ``batch``) in the driver each round and
hands it to TFF. This script builds ``--datasets`` such pipelines one after another (each
dropped at once), after ``--warmup`` untimed ones, in a child process per stage, and
reports the growth of the process's resident memory (``VmRSS``) per dataset built and of
what Python's ``tracemalloc`` sees. Pure TensorFlow, no TFF: a growth here is
TensorFlow's, and the driver's growth on ``tff`` in ``soak.py`` follows from it.

  .venv/bin/python benchmarks/dataset_leak.py [--datasets 6000] [--warmup 300]

Writes benchmarks/results/dataset_leak.json.
"""

import argparse
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
STAGES = ('from_tensor_slices', 'range', 'range_batch', 'range_shuffle', 'client_dataset')


def measure(stage: str, datasets: int, warmup: int) -> dict:
  """Builds ``warmup`` then ``datasets`` datasets of ``stage`` in this process."""
  import gc  # pylint: disable=g-import-not-at-top
  import tracemalloc  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sys.path.insert(0, _ROOT)
  from tff_noisy.federated import client_data  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  client = client_data.make_client_data(rng.random((20, 64), np.float32),
                                        rng.integers(10, size=20), 10, 7)
  build = {
      'from_tensor_slices': lambda: tf.data.Dataset.from_tensor_slices(client.features),
      'range': lambda: tf.data.Dataset.range(20),
      'range_batch': lambda: tf.data.Dataset.range(20).batch(10),
      'range_shuffle': lambda: tf.data.Dataset.range(20).shuffle(20, seed=7),
      'client_dataset': client.dataset,
  }[stage]
  for _ in range(warmup):
    build()
  gc.collect()
  tracemalloc.start()
  rss_before, traced_before = rss_bytes(), tracemalloc.get_traced_memory()[0]
  for _ in range(datasets):
    build()
  gc.collect()
  rss_growth = rss_bytes() - rss_before
  traced_growth = tracemalloc.get_traced_memory()[0] - traced_before
  return {'stage': stage, 'datasets': datasets, 'warmup': warmup,
          'rss_growth_bytes': rss_growth, 'rss_bytes_per_dataset': rss_growth / datasets,
          'python_traced_bytes_per_dataset': traced_growth / datasets}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--datasets', type=int, default=6000, help='datasets built per stage')
  parser.add_argument('--warmup', type=int, default=300, help='built first, not counted')
  parser.add_argument('--out', default=RESULTS)
  parser.add_argument('--one', choices=STAGES, help=argparse.SUPPRESS)  # Child: one stage.
  args = parser.parse_args()
  if args.datasets < 1 or args.warmup < 0:
    parser.error('--datasets: at least 1; --warmup: at least 0')
  if args.one:
    print(json.dumps(measure(args.one, args.datasets, args.warmup)))
    return
  rows = []
  for stage in STAGES:
    child = subprocess.run(
        [sys.executable, __file__, '--one', stage, '--datasets', str(args.datasets),
         '--warmup', str(args.warmup)], cwd=_ROOT, stdout=subprocess.PIPE, text=True,
        check=True)
    rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    print(f'{stage:>20}: {rows[-1]["rss_bytes_per_dataset"]:8.0f} B resident, '
          f'{rows[-1]["python_traced_bytes_per_dataset"]:6.0f} B Python, per dataset')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, 'w') as f:
    json.dump({'stages': rows, 'tensorflow': tf.__version__,
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform(),
                           'python': platform.python_version()}}, f, indent=1)


if __name__ == '__main__':
  main()
