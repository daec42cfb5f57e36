"""Geometric median of 100 clients x 1,000,000 parameters x 10 Weiszfeld iterations.

Three implementations on the same float32 data in one run: the ``geom-median`` package's
NumPy ``compute_geometric_median`` (Pillutla's reference, the baseline), this project's
NumPy twin ``ops.geometric_median.weiszfeld`` and the in-TFF ``GeometricMedianFactory``
(one float32[1M] tensor per client). Every one runs all 10 iterations: the tolerances are
0 (the package's ftol stays at its 1e-20; it would stop only on an unchanged objective),
and each client's noise has its own scale, so Weiszfeld does not reach a fixed point
sooner. The objectives sum_j w_j ||x_j - z|| (weights normalised) must agree with the
package's within 1e-4 relative. Targets on 2 CPU cores: twin <= 0.5x the package's time,
in-TFF <= 1.5x. Times are medians over ``--repeats`` runs (all are kept); the TFF runs
follow a first call, which also compiles. ``tff_mean_s``, MeanFactory on the same inputs,
is the cost of handing 400 MB of client values to the TFF runtime, included in the TFF
time. The load average is recorded: other processes on the 2 cores stretch wall times.

Then FedAvg on ``experiments/configs/demo.yaml`` (``--demo-rounds`` rounds) with each
aggregator: the median seconds per round after the first (which traces), and the final
test accuracy, beside ``mean``'s in the same run.

  .venv/bin/python benchmarks/aggregators.py [--clients 100] [--dim 1000000] [--repeats 3]
                                             [--demo-rounds 8]

Writes benchmarks/results/aggregators.json. Needs ``pip install geom-median``
(benchmarks/requirements.txt).
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top

from tff_noisy.ops import geometric_median  # pylint: disable=g-import-not-at-top

RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'aggregators.json')
SMOOTHING = 1e-6  # RFA's nu; the package calls it eps.


def _timed(repeats, fn, *args, **kwargs):
  """Returns ({wall_s, cpu_s: medians, wall_all_s}, the last fn(*args, **kwargs)).

  cpu_s counts this process only (not the TFF worker's).
  """
  walls, cpus = [], []
  for _ in range(repeats):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn(*args, **kwargs)
    walls.append(time.perf_counter() - wall)
    cpus.append(time.process_time() - cpu)
  return {'wall_s': statistics.median(walls), 'cpu_s': statistics.median(cpus),
          'wall_all_s': walls}, value


def _data(num_clients, dim):
  """A common vector plus per-client noise of log-normally spread scale."""
  rng = np.random.default_rng(0)
  points = rng.standard_normal((num_clients, dim), dtype=np.float32)
  points *= rng.lognormal(0.0, 1.5, (num_clients, 1)).astype(np.float32)
  points += rng.standard_normal(dim, dtype=np.float32)
  return points, rng.uniform(1.0, 100.0, num_clients)


def bench_package(points, weights, iterations, repeats):
  from geom_median.numpy import compute_geometric_median  # pylint: disable=g-import-not-at-top
  times, result = _timed(repeats, compute_geometric_median, points, weights, eps=SMOOTHING,
                         maxiter=iterations)
  return dict(times, iterations=len(result.logs) - 1, objective=float(result.logs[-1]))


def bench_twin(points, weights, iterations, repeats):
  times, result = _timed(repeats, geometric_median.weiszfeld, points, weights,
                         max_iter=iterations, eps=0.0, smoothing=SMOOTHING)
  return dict(times, iterations=result.iterations, objective=result.objective)


def bench_tff(points, weights, iterations, repeats):
  # pylint: disable=g-import-not-at-top
  from tff_noisy.federated.aggregators import geometric_median as factory
  from tff_noisy.tff_runtime import import_tff
  tff = import_tff()
  value_type = tff.TensorType(np.float32, [points.shape[1]])
  weight_type = tff.TensorType(np.float32)
  values, client_weights = list(points), [np.float32(w) for w in weights]
  process = factory.GeometricMedianFactory(iterations, eps=0.0, smoothing=SMOOTHING).create(
      value_type, weight_type)
  first, _ = _timed(1, process.next, (), values, client_weights)
  times, output = _timed(repeats, process.next, (), values, client_weights)
  mean = tff.aggregators.MeanFactory().create(value_type, weight_type)
  state = mean.initialize()
  mean.next(state, values, client_weights)
  mean_times, _ = _timed(repeats, mean.next, state, values, client_weights)
  return dict(times, first_call_wall_s=first['wall_s'], tff_mean_s=mean_times['wall_s'],
              iterations=int(output.measurements['iterations']),
              objective=float(output.measurements['objective']))


def demo_rounds(rounds: int) -> dict:
  """FedAvg on the demo config with every aggregator: seconds per round and accuracy."""
  import tempfile  # pylint: disable=g-import-not-at-top
  from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
  from tff_noisy.federated import aggregators  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
  config_path = os.path.join(os.path.dirname(__file__), '..', 'experiments', 'configs',
                             'demo.yaml')
  measured = {}
  for name in aggregators.AGGREGATORS:
    config = config_lib.load(config_path, [f'fl.rounds={rounds}', f'fl.aggregator={name}',
                                           'method.name=fedavg', 'method.params={}'])
    with tempfile.TemporaryDirectory() as out:
      results = driver.run_experiment(config, out, progress=False)
    seconds = [r['seconds'] for r in results.rounds[1:]]
    measured[name] = {'seconds_per_round': statistics.median(seconds),
                      'first_round_s': results.rounds[0]['seconds'],
                      'final_accuracy': results.final_accuracy}
    print(f"demo fedavg + {name:28s} {measured[name]['seconds_per_round']:.3f} s/round "
          f"(first {measured[name]['first_round_s']:.1f} s), final accuracy "
          f"{results.final_accuracy:.4f}")
  base = measured['mean']['seconds_per_round']
  for entry in measured.values():
    entry['ratio_to_mean'] = entry['seconds_per_round'] / base
  return measured


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--clients', type=int, default=100)
  parser.add_argument('--dim', type=int, default=1_000_000)
  parser.add_argument('--iterations', type=int, default=10)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--demo-rounds', type=int, default=8)
  parser.add_argument('--out', default=RESULTS)
  args = parser.parse_args()
  if importlib.util.find_spec('geom_median') is None:
    sys.exit('The baseline needs the geom-median package: .venv/bin/pip install geom-median '
             '(or -r benchmarks/requirements.txt)')
  points, weights = _data(args.clients, args.dim)
  results = {'cpus': os.cpu_count(), 'clients': args.clients, 'dim': args.dim,
             'iterations': args.iterations, 'repeats': args.repeats,
             'load_average_before': os.getloadavg()[0]}
  for name, bench in (('package', bench_package), ('twin', bench_twin), ('tff', bench_tff)):
    results[name] = bench(points, weights, args.iterations, args.repeats)
  results['load_average_after'] = os.getloadavg()[0]
  baseline = results['package']
  for name in ('twin', 'tff'):
    entry = results[name]
    entry['time_ratio_to_package'] = entry['wall_s'] / baseline['wall_s']
    entry['objective_relative_difference'] = abs(
        entry['objective'] - baseline['objective']) / baseline['objective']
  results['targets'] = {
      'twin_time_ratio_max': 0.5, 'tff_time_ratio_max': 1.5, 'objective_rtol': 1e-4,
      'met': bool(results['twin']['time_ratio_to_package'] <= 0.5
                  and results['tff']['time_ratio_to_package'] <= 1.5
                  and results['twin']['objective_relative_difference'] <= 1e-4
                  and results['tff']['objective_relative_difference'] <= 1e-4)}
  for name in ('package', 'twin', 'tff'):
    entry = results[name]
    ratio = entry.get('time_ratio_to_package', 1.0)
    print(f"{name:8s} wall {entry['wall_s']:7.2f} s  cpu {entry['cpu_s']:7.2f} s  "
          f"ratio {ratio:5.2f}  iterations {entry['iterations']:2d}  "
          f"objective {entry['objective']:.8g}  runs "
          + ' '.join(f'{w:.2f}' for w in entry['wall_all_s']))
  print(f"tff: first call {results['tff']['first_call_wall_s']:.2f} s (compiles); "
        f"MeanFactory on the same inputs {results['tff']['tff_mean_s']:.2f} s")
  print(f"targets met: {results['targets']['met']}")
  results['demo_fedavg'] = {'rounds': args.demo_rounds, 'per_aggregator': demo_rounds(
      args.demo_rounds)}
  results['load_average_end'] = os.getloadavg()[0]
  with open(args.out, 'w') as f:
    json.dump(results, f, indent=2)


if __name__ == '__main__':
  main()
