"""Seconds per round and peak memory with 10 to 10,000 participating clients, per runtime.

Each (runtime, size) runs in its own Python process (so each peak is its own): FedAvg
with the `mlp` model, E=1, every client sampled every round, through the driver's own
round (``driver.client_datasets`` then ``rounds.train``) on the client runtime
``--runtime`` names (``fl.client_runtime``: ``tff``, TFF's local C++ worker; ``tf``, this
process's TensorFlow with clients stacked per call). Each client holds ``--examples``
scikit-learn digits drawn with replacement (seeded): the benchmark measures the
machinery, not accuracy, and digits has too few images to give 10,000 clients 20
distinct ones each. Per size it reports the median seconds of the rounds after the
first two (the first traces and compiles, the second still warms TFF's caches), split
into building the clients' ``ClientData`` in Python and ``process.next`` (``tff``: each
client's ``tf.data`` dataset built and serialised into the computation, the clients'
training in the worker, the aggregation; ``tf``: the batch orders, the stacked training,
the aggregation in TFF's worker), the peak resident memory (VmHWM) of the driver process
and of TFF's ``worker_binary``, and each runtime's clients per second against ``tff``'s
at the same size, measured in the same invocation.
The project's targets: time per round grows no faster than linearly in participating
clients; 10,000 clients per round fit in 8 GB, driver plus worker; the ``tf`` runtime at
10,000 clients >= 10x ``tff``'s clients per second, goal 30x; peak memory per client
<= ``tff``'s.

  .venv/bin/python benchmarks/scale.py [--runtime tff,tf] [--clients 10,100,1000,10000]
      [--rounds 4] [--examples 20] [--batch-size 10]

Writes benchmarks/results/scale.json.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

WARMUP_ROUNDS = 2  # Not timed: tracing, then TFF's first-call caches.
RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'scale.json')
_ROOT = os.path.join(os.path.dirname(__file__), '..')


def peak_rss_bytes(pid='self') -> int:
  """A process's peak resident set size (Linux ``VmHWM``)."""
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmHWM:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f'no VmHWM for process {pid}')


def cpu_seconds(pid='self') -> float:
  """User plus system CPU seconds a process has used, all its threads."""
  with open(f'/proc/{pid}/stat') as f:
    fields = f.read().rsplit(')', 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _config(num_clients: int, batch_size: int, runtime: str):
  from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.from_dict({
      'seed': 0,
      'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': num_clients},
      'model': {'name': 'mlp'},
      'method': {'name': 'fedavg'},
      'fl': {'rounds': 1, 'clients_per_round': num_clients, 'local_epochs': 1,
             'batch_size': batch_size, 'client_lr': 0.05, 'client_runtime': runtime},
  })


def _clients_with_replacement(num_clients: int, examples: int, seed: int = 0):
  """``FederatedData`` of ``num_clients`` clients, each ``examples`` digits drawn with
  replacement (clean labels)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tff_noisy.data import federated as federated_data  # pylint: disable=g-import-not-at-top
  from tff_noisy.data import sources  # pylint: disable=g-import-not-at-top
  source = sources.load_dataset('digits')
  rng = np.random.default_rng(seed)
  ids = [f'client_{i:05d}' for i in range(num_clients)]
  picks = {cid: rng.integers(len(source.y_train), size=examples) for cid in ids}
  num_classes = source.num_classes
  return federated_data.FederatedData(
      dataset_name='digits', num_classes=num_classes,
      input_shape=tuple(source.input_shape), class_names=source.class_names,
      config_hash='scale-benchmark', client_ids=ids,
      x={cid: source.x_train[p] for cid, p in picks.items()},
      y={cid: source.y_train[p] for cid, p in picks.items()},
      y_true={cid: source.y_train[p] for cid, p in picks.items()},
      noise_rates=np.zeros(num_clients),
      transition_matrices=np.tile(np.eye(num_classes), (num_clients, 1, 1)),
      x_test=source.x_test, y_test=source.y_test)


def measure_one(num_clients: int, rounds: int, examples: int, batch_size: int,
                runtime: str) -> dict:
  """Runs ``rounds`` rounds with ``num_clients`` clients in this process."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tff_noisy import tff_runtime  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import assembly  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import rounds as round_lib  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation.client_state import ClientStateStore  # pylint: disable=g-import-not-at-top

  config = _config(num_clients, batch_size, runtime)
  data = _clients_with_replacement(num_clients, examples)
  method = assembly.build_method(config, data)
  process = method.process
  tf.keras.utils.set_random_seed(0)  # The same initial model on every runtime.
  state = assembly.initial_state(process, method.setup.model_fn())
  store = ClientStateStore()
  rss_before_rounds = peak_rss_bytes()
  # TFF started its worker for process.initialize.
  workers = [p.pid for p in tff_runtime._worker_processes() if p.poll() is None]  # pylint: disable=protected-access
  build_s, next_s, next_driver_cpu_s, next_worker_cpu_s = [], [], [], []
  for round_num in range(1, rounds + 1):
    seeds = np.random.default_rng([0, round_num, 1]).integers(2**31, size=num_clients)
    started = time.perf_counter()
    datasets, _ = driver.client_datasets(method.recipe.data, data, store, data.client_ids, seeds,
                                         batch_size)
    built = time.perf_counter()
    cpu_before = cpu_seconds(), sum(cpu_seconds(pid) for pid in workers)
    trained = round_lib.train(method.recipe, process, round_num, state, datasets,
                           [()] * len(datasets), None, None)
    state, metrics = trained.state, trained.metrics
    build_s.append(built - started)
    next_s.append(time.perf_counter() - built)
    next_driver_cpu_s.append(cpu_seconds() - cpu_before[0])
    next_worker_cpu_s.append(sum(cpu_seconds(pid) for pid in workers) - cpu_before[1])
    del datasets
    print(f'  {runtime}: {num_clients} clients, round {round_num}: datasets {build_s[-1]:.2f} s, '
          f'process.next {next_s[-1]:.2f} s (CPU: driver {next_driver_cpu_s[-1]:.2f} s, '
          f'worker {next_worker_cpu_s[-1]:.2f} s), train loss {metrics["train_loss"]:.3f}',
          file=sys.stderr, flush=True)
  worker_rss = sum(peak_rss_bytes(pid) for pid in workers)
  later = slice(WARMUP_ROUNDS, None)
  return {
      'runtime': runtime, 'runtime_record': assembly.describe_runtime(process),
      'clients': num_clients, 'examples_per_client': examples, 'batch_size': batch_size,
      'rounds': rounds,
      'first_round_s': build_s[0] + next_s[0],
      'round_s': statistics.median(b + n for b, n in zip(build_s[later], next_s[later])),
      'datasets_s': statistics.median(build_s[later]),
      'process_next_s': statistics.median(next_s[later]),
      'process_next_driver_cpu_s': statistics.median(next_driver_cpu_s[later]),
      'process_next_worker_cpu_s': statistics.median(next_worker_cpu_s[later]),
      'datasets_s_per_round': build_s, 'process_next_s_per_round': next_s,
      'driver_peak_rss_bytes': peak_rss_bytes(),
      'driver_rss_before_rounds_bytes': rss_before_rounds,
      'worker_peak_rss_bytes': worker_rss, 'worker_processes': len(workers),
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--runtime', default='tff,tf',
                      help='comma-separated client runtimes (the first is the reference)')
  parser.add_argument('--clients', default='10,100,1000,10000',
                      help='comma-separated participating clients per round')
  parser.add_argument('--rounds', type=int, default=4,
                      help=f'rounds per size, the first {WARMUP_ROUNDS} not timed')
  parser.add_argument('--examples', type=int, default=20, help='examples per client')
  parser.add_argument('--batch-size', type=int, default=10)
  parser.add_argument('--one', type=int, help=argparse.SUPPRESS)  # Child: one size.
  args = parser.parse_args()
  if args.rounds <= WARMUP_ROUNDS:
    parser.error(f'--rounds: must be > {WARMUP_ROUNDS} (the first {WARMUP_ROUNDS} warm up)')
  runtimes = args.runtime.split(',')
  if args.one:
    print(json.dumps(measure_one(args.one, args.rounds, args.examples, args.batch_size,
                                 runtimes[0])))
    return

  sizes = [int(n) for n in args.clients.split(',')]
  load_before = os.getloadavg()
  rows = []
  for size in sizes:  # Runtimes side by side at each size, under the same load.
    for runtime in runtimes:
      child = subprocess.run(
          [sys.executable, __file__, '--one', str(size), '--rounds', str(args.rounds),
           '--examples', str(args.examples), '--batch-size', str(args.batch_size),
           '--runtime', runtime], cwd=_ROOT, stdout=subprocess.PIPE, text=True, check=True)
      rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
  print(f'\n{"runtime":>8}{"clients":>8}{"s/round":>9}{"data s":>8}{"next s":>9}'
        f'{"clients/s":>10}{"x ref":>7}{"x linear":>9}{"driver GB":>10}{"worker GB":>10}'
        f'{"KB/client":>10}')
  for row in rows:
    base = next(r for r in rows if r['runtime'] == row['runtime'])
    reference = next(r for r in rows if r['runtime'] == runtimes[0]
                     and r['clients'] == row['clients'])
    # Time per round relative to linear growth from the smallest size (1.0: linear).
    row['vs_linear'] = (row['round_s'] / base['round_s']) / (row['clients'] / base['clients'])
    row['clients_per_s'] = row['clients'] / row['round_s']
    row['speedup_vs_reference'] = reference['round_s'] / row['round_s']
    row['total_peak_rss_bytes'] = row['driver_peak_rss_bytes'] + row['worker_peak_rss_bytes']
    row['peak_rss_bytes_per_client'] = row['total_peak_rss_bytes'] / row['clients']
    print(f'{row["runtime"]:>8}{row["clients"]:>8}{row["round_s"]:>9.2f}'
          f'{row["datasets_s"]:>8.2f}{row["process_next_s"]:>9.2f}{row["clients_per_s"]:>10.0f}'
          f'{row["speedup_vs_reference"]:>7.1f}{row["vs_linear"]:>9.2f}'
          f'{row["driver_peak_rss_bytes"] / 1e9:>10.2f}{row["worker_peak_rss_bytes"] / 1e9:>10.2f}'
          f'{row["peak_rss_bytes_per_client"] / 1e3:>10.0f}')
  os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
  with open(RESULTS, 'w') as f:
    json.dump({'sizes': rows, 'reference_runtime': runtimes[0], 'model': 'mlp',
               'method': 'fedavg', 'local_epochs': 1,
               'data': 'digits drawn with replacement per client',
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform(),
                           'python': platform.python_version(),
                           'load_average_before': load_before,
                           'load_average_after': os.getloadavg()}}, f, indent=1)
  print(f'wrote {RESULTS}')


if __name__ == '__main__':
  main()
