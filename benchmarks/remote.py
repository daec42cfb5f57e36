"""Seconds per round: TFF's local worker vs N loopback workers (``--workers``).

Runs one config (default: the demo config with FedAvg) locally, then with its clients
split over ``--workers-count`` workers on 127.0.0.1 started here as a user starts them:
``tff-noisy worker --host 127.0.0.1 --certs DIR`` (the binary in a private network
namespace behind a mutual-TLS front; a certificate set made for the run, the driver
holding its client certificate), never a bare ``worker_binary`` on an open port. Prints
each one's first round (compilation included), the median of the later rounds, the
remote/local ratio and whether the final weights agree. Writes
benchmarks/results/remote.json.

  .venv/bin/python benchmarks/remote.py [CONFIG] [--rounds 10] [--workers-count 2]
      [--set key=value ...]
"""

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top
import portpicker  # pylint: disable=g-import-not-at-top

from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
from tff_noisy import files  # pylint: disable=g-import-not-at-top
from tff_noisy import tff_runtime  # pylint: disable=g-import-not-at-top
from tff_noisy import worker_tls  # pylint: disable=g-import-not-at-top
from tff_noisy import workers  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import results as results_lib  # pylint: disable=g-import-not-at-top

_ROOT = os.path.join(os.path.dirname(__file__), '..')
RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'remote.json')
ROUTE = 'tff-noisy worker --host 127.0.0.1 --certs DIR (mutual TLS, private namespace)'


def _start_worker(port: int, certs: str):
  """``tff-noisy worker`` on ``port`` of 127.0.0.1 with mutual TLS, once it listens."""
  command = tff_runtime.WorkerPopen(  # Killed with this process.
      [sys.executable, '-m', 'experiments.run', 'worker', '--port', str(port),
       '--host', workers.LOOPBACK, '--certs', certs],
      cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  line = command.stdout.readline()
  if f'listening on port {port}' not in line:
    _stop_worker(command)
    raise SystemExit(f'benchmarks/remote.py: error: the worker on port {port} did not '
                     f'start: {line.strip() or "no output"}')
  return command


def _stop_worker(command) -> None:
  """SIGTERM (the worker stops its binary), then SIGKILL after 30 s."""
  if command.poll() is None:
    command.send_signal(signal.SIGTERM)
  try:
    command.communicate(timeout=30)
  except subprocess.TimeoutExpired:
    command.kill()
    command.communicate()


def _timed_run(config, out, addresses=None) -> dict:
  results = driver.run_experiment(config, out, progress=False, workers=addresses)
  seconds = [r['seconds'] for r in results.rounds]
  return {'first_round_s': seconds[0], 'median_round_s': statistics.median(seconds[1:]),
          'rounds_s': seconds, 'final_accuracy': results.final_accuracy}


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('config', nargs='?',
                      default=os.path.join(_ROOT, 'experiments', 'configs', 'demo.yaml'))
  parser.add_argument('--rounds', type=int, default=10)
  parser.add_argument('--workers-count', type=int, default=2)
  parser.add_argument('--set', action='append', default=[],
                      help='config override (default adds method.name=fedavg)')
  args = parser.parse_args()
  overrides = ['method.name=fedavg', 'method.params={}', *args.set, f'fl.rounds={args.rounds}']
  config = config_lib.load(args.config, overrides)
  ports = [portpicker.pick_unused_port() for _ in range(args.workers_count)]
  with tempfile.TemporaryDirectory() as tmp:
    certs = os.path.join(tmp, 'certs')
    worker_tls.create(certs, [])  # Valid for 127.0.0.1; the driver's half set below.
    previous = os.environ.get(worker_tls.CERTS_ENV)
    os.environ[worker_tls.CERTS_ENV] = certs
    servers = []
    try:
      servers.extend(_start_worker(port, certs) for port in ports)
      addresses = [f'{workers.LOOPBACK}:{port}' for port in ports]
      workers.check_workers(addresses, timeout=30)
      local = _timed_run(config, os.path.join(tmp, 'local'))
      remote = _timed_run(config, os.path.join(tmp, 'remote'), addresses)
      weight_difference = max(
          float(np.max(np.abs(a - b))) for a, b in zip(
              results_lib.load_final_weights(os.path.join(tmp, 'local')),
              results_lib.load_final_weights(os.path.join(tmp, 'remote'))))
    finally:
      for server in servers:
        _stop_worker(server)
      if previous is None:
        os.environ.pop(worker_tls.CERTS_ENV, None)
      else:
        os.environ[worker_tls.CERTS_ENV] = previous
  ratio = remote['median_round_s'] / local['median_round_s']
  report = {
      'config': files.portable_path(args.config, _ROOT),
      'overrides': files.portable_overrides(overrides, _ROOT),
      'clients_per_round': config.clients_per_round(), 'workers': args.workers_count,
      'workers_started_as': ROUTE,
      'local': local, 'remote': remote, 'ratio_median_round': ratio,
      'max_final_weight_difference': weight_difference,
      'machine': {'cpus': os.cpu_count(), 'load_average': os.getloadavg(),
                  'python': platform.python_version()},
  }
  os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
  with open(RESULTS, 'w') as f:
    json.dump(report, f, indent=1)
  print(f"local:  first round {local['first_round_s']:.1f} s, then median "
        f"{local['median_round_s']:.2f} s/round")
  print(f"remote ({args.workers_count} loopback workers): first round "
        f"{remote['first_round_s']:.1f} s, then median {remote['median_round_s']:.2f} s/round")
  print(f'ratio remote/local {ratio:.2f}; final weights differ by at most '
        f'{weight_difference:.2g}; load average {os.getloadavg()[0]:.1f} on '
        f'{os.cpu_count()} CPUs; wrote {RESULTS}')


if __name__ == '__main__':
  main()
