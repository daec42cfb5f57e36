"""Speed of the pure-math ops at the sizes the methods need; prints seconds per run.

  .venv/bin/python benchmarks/ops_speed.py [--out benchmarks/results/ops_speed.json]

Targets on 2 CPU cores: Dawid-Skene EM with 100 clients x 5,000 public samples x 10
classes x 500 iterations under 5 s (FedDS server step); exact k-NN vote over 60,000 x
512-d embeddings with k=100 under 20 s (NNC). The machine's load average is printed
too, with the CPU seconds each run used (over both cores): on a shared machine other
processes stretch the wall-clock time, much less the CPU time.
"""

import argparse
import json
import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top

from tff_noisy.ops import dawid_skene  # pylint: disable=g-import-not-at-top
from tff_noisy.ops import knn  # pylint: disable=g-import-not-at-top


def _timed(fn, *args, **kwargs):
  """Returns ({'wall_s', 'cpu_s'}, fn(*args, **kwargs))."""
  wall, cpu = time.perf_counter(), time.process_time()
  value = fn(*args, **kwargs)
  return {'wall_s': time.perf_counter() - wall, 'cpu_s': time.process_time() - cpu}, value


def bench_dawid_skene(num_clients=100, num_samples=5000, num_classes=10, iterations=500):
  """Annotators of accuracy 0.1-0.9; tol=0 makes EM run every iteration."""
  rng = np.random.default_rng(0)
  truth = rng.integers(0, num_classes, num_samples)
  accuracy = rng.uniform(0.1, 0.9, (num_clients, 1))
  predictions = np.where(rng.random((num_clients, num_samples)) < accuracy, truth,
                         rng.integers(0, num_classes, (num_clients, num_samples)))
  times, result = _timed(dawid_skene.dawid_skene, predictions, num_classes,
                         max_iter=iterations, tol=0)
  assert result.iterations == iterations
  return times


def bench_knn_vote(num_samples=60000, dim=512, k=100, num_classes=10):
  rng = np.random.default_rng(0)
  embeddings = rng.standard_normal((num_samples, dim), dtype=np.float32)
  labels = rng.integers(0, num_classes, num_samples)
  knn.knn_vote(embeddings[:1000], labels[:1000], k)  # Trace the TF function first.
  return _timed(knn.knn_vote, embeddings, labels, k)[0]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--out', help='also write the results to this JSON file')
  args = parser.parse_args()
  results = {'cpus': os.cpu_count(), 'load_average_before': os.getloadavg()[0]}
  results['dawid_skene_100x5000x10_500it'] = bench_dawid_skene()
  results['knn_vote_60000x512_k100'] = bench_knn_vote()
  results['load_average_after'] = os.getloadavg()[0]
  for name, value in results.items():
    if isinstance(value, dict):
      value = '  '.join(f'{key} {seconds:7.2f}' for key, seconds in value.items())
    print(f'{name:32s} {value}')
  if args.out:
    with open(args.out, 'w') as f:
      json.dump(results, f, indent=2)


if __name__ == '__main__':
  main()
