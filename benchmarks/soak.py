"""Resident memory over a long run: does it stay flat?

FedAvg with the `mlp` model through the public API (``tff_noisy.build``, then
``Process.next`` every round: sampling, client training, aggregation, evaluation, the
round's record), every client sampled every round, each client holding ``--examples``
scikit-learn digits drawn with replacement (as ``scale.py``). The driver's resident
memory (``VmRSS``, and TFF's ``worker_binary``'s for ``tff``) is sampled after every
round; the growth is the change from round ``--settle`` to the last, as a share of the
memory at round ``--settle`` (the first rounds trace and fill caches). Each runtime runs
in its own process; ``worker_preload`` records the worker's allocator
(``TFF_NOISY_WORKER_MALLOC``, ``tff_noisy/tff_runtime.py``).

  .venv/bin/python benchmarks/soak.py [--runtime tf,tff] [--clients 1000]
      [--rounds 500,100] [--settle 20]

Writes benchmarks/results/soak.json.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(__file__))

import scale  # pylint: disable=g-import-not-at-top,wrong-import-position

RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'soak.json')
_ROOT = os.path.join(os.path.dirname(__file__), '..')


def rss_bytes(pid='self') -> int:
  """A process's current resident set size (Linux ``VmRSS``)."""
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f'no VmRSS for process {pid}')


def soak(runtime: str, num_clients: int, rounds: int, examples: int, batch_size: int,
         settle: int) -> dict:
  """``rounds`` rounds on ``runtime`` in this process, memory sampled after each."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tff_noisy  # pylint: disable=g-import-not-at-top
  from tff_noisy import tff_runtime  # pylint: disable=g-import-not-at-top
  import models  # pylint: disable=g-import-not-at-top
  data = scale._clients_with_replacement(num_clients, examples)  # pylint: disable=protected-access
  process = tff_noisy.build(
      'fedavg', model_fn=lambda: models.build_model('mlp', (8, 8, 1), 10, width=128),
      data=data, rounds=rounds, clients_per_round=num_clients, local_epochs=1,
      batch_size=batch_size, client_lr=0.05, client_runtime=runtime)
  tf.keras.utils.set_random_seed(0)
  state = process.initialize()
  workers = [p.pid for p in tff_runtime._worker_processes() if p.poll() is None]  # pylint: disable=protected-access
  driver_rss, worker_rss, seconds = [], [], []
  for round_num in range(1, rounds + 1):
    started = time.perf_counter()
    state, record = process.next(state)
    seconds.append(time.perf_counter() - started)
    driver_rss.append(rss_bytes())
    worker_rss.append(sum(rss_bytes(pid) for pid in workers))
    if round_num % max(1, rounds // 10) == 0 or round_num == rounds:
      print(f'  {runtime}: round {round_num}/{rounds}, {seconds[-1]:.2f} s, driver '
            f'{driver_rss[-1] / 1e6:.0f} MB, worker {worker_rss[-1] / 1e6:.0f} MB, test '
            f'accuracy {record.get("test_accuracy", float("nan")):.3f}', file=sys.stderr,
            flush=True)
  settled = min(settle, rounds) - 1
  total = [d + w for d, w in zip(driver_rss, worker_rss)]
  return {'runtime': runtime, 'clients': num_clients, 'rounds': rounds,
          'worker_preload': tff_runtime.worker_preload() or None,  # Its allocator.
          'examples_per_client': examples, 'batch_size': batch_size, 'settle_round': settled + 1,
          'growth_after_settle': (total[-1] - total[settled]) / total[settled],
          'driver_growth_after_settle': (driver_rss[-1] - driver_rss[settled])
                                        / driver_rss[settled],
          'driver_rss_bytes': driver_rss, 'worker_rss_bytes': worker_rss,
          'round_seconds': seconds}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--runtime', default='tf,tff', help='comma-separated client runtimes')
  parser.add_argument('--clients', type=int, default=1000, help='clients per round')
  parser.add_argument('--rounds', default='500,100',
                      help='rounds per runtime, comma-separated in --runtime order')
  parser.add_argument('--examples', type=int, default=20)
  parser.add_argument('--batch-size', type=int, default=10)
  parser.add_argument('--settle', type=int, default=20,
                      help='the round growth is measured from (default: %(default)s)')
  parser.add_argument('--out', default=RESULTS)
  parser.add_argument('--one', help=argparse.SUPPRESS)  # Child: one runtime.
  args = parser.parse_args()
  runtimes = args.runtime.split(',')
  rounds = [int(r) for r in args.rounds.split(',')]
  if len(rounds) != len(runtimes):
    parser.error(f'--rounds: one count per runtime ({len(runtimes)}), got {args.rounds}')
  if any(r < args.settle for r in rounds):
    parser.error(f'--rounds: each at least --settle ({args.settle})')
  if args.one:
    print(json.dumps(soak(args.one, args.clients, rounds[0], args.examples,
                          args.batch_size, args.settle)))
    return
  rows = []
  for runtime, count in zip(runtimes, rounds):
    child = subprocess.run(
        [sys.executable, __file__, '--one', runtime, '--runtime', runtime, '--rounds',
         str(count), '--clients', str(args.clients), '--examples', str(args.examples),
         '--batch-size', str(args.batch_size), '--settle', str(args.settle)],
        cwd=_ROOT, stdout=subprocess.PIPE, text=True, check=True)
    rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    row = rows[-1]
    print(f'{runtime}: {row["rounds"]} rounds of {row["clients"]} clients; resident memory '
          f'{row["growth_after_settle"]:+.1%} from round {row["settle_round"]} to the last '
          f'(driver {row["driver_growth_after_settle"]:+.1%})')
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, 'w') as f:
    json.dump({'runs': rows, 'model': 'mlp', 'method': 'fedavg',
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform(),
                           'python': platform.python_version()}}, f, indent=1)
  print(f'wrote {args.out}')


if __name__ == '__main__':
  main()
