"""A grid's or a comparison's runs, up to ``jobs`` at once, each in a process of its own
(``--jobs N``).

Each run is a ``tff-noisy run`` of its validated config (written as JSON, which the
config loader reads as YAML), started with ``--resume`` or ``--overwrite`` as the grid
was, its output appended to ``OUT/logs/SETTING__seedN__METHOD.log``. A run's results
depend on its config alone, so they equal the grid's one-at-a-time runs. A run that fails
stops new ones from starting; the others finish, then the error names each failed run and
its log. A comparison's logs are ``OUT/logs/METHOD.log``. Ctrl-C or SIGTERM stops the
running ones as either stops a run (their checkpoints kept for ``--resume``).
TensorFlow-free.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

from tff_noisy import config as config_lib
from tff_noisy.errors import UserError
from tff_noisy.simulation import progress
from tff_noisy.simulation import results as results_lib

LOG_DIR = 'logs'
_STOP_SECONDS = 600  # How long a stopped run may take to save and exit before SIGKILL.
_UNIT = {'grid': 'cell', 'compare': 'run'}  # What the progress lines call one run.


class RunsFailed(UserError):
  """One or more runs of a grid or a comparison ended with an error."""


def log_path(out: str, run_path: str) -> str:
  """Where the output of the run in ``OUT/run_path`` goes."""
  return os.path.join(out, LOG_DIR, run_path.replace(os.sep, '__') + '.log')


def run_all(planned: list, out: str, jobs: int, command: Callable[[str, str], List[str]],
            poll_seconds: float = 0.5, study: str = 'grid') -> Dict[str, Dict[str, Any]]:
  """Runs every ``studies.PlannedRun`` of ``planned``, ``jobs`` at a time; returns each
  run's results (``results.load``: read once, for its progress line) by its path.

  Args:
    planned: the study's runs, in order; each is started in this order.
    out: the study's directory (runs go in ``OUT/run.path``).
    jobs: the most runs at once, >= 1.
    command: ``command(config_file, run_dir)``: the command line of one run.
    poll_seconds: how often the running processes are checked.
    study: ``grid`` or ``compare``, which the progress lines and errors name.

  Raises:
    RunsFailed: a run exited with an error (the message names each, with its log).
  """
  total, waiting = len(planned), list(enumerate(planned, 1))
  unit = f'[{study}] {_UNIT[study]}'  # Progress lines say '[grid] cell 3 of 54'.
  running: Dict[int, tuple] = {}  # Number -> (run, process, its log file, start time).
  failed, loaded = [], {}
  os.makedirs(os.path.join(out, LOG_DIR), exist_ok=True)
  with tempfile.TemporaryDirectory(prefix='tff-noisy-runs-') as configs:
    try:
      while running or (waiting and not failed):
        while waiting and not failed and len(running) < jobs:
          number, run = waiting.pop(0)
          running[number] = _start(run, number, f'{unit} {number} of {total}', out,
                                   configs, command)
        for number, (run, process, log, started) in list(running.items()):
          if process.poll() is None:
            continue
          log.close()
          del running[number]
          took = progress.duration(time.monotonic() - started)
          if process.returncode == 0:
            done = loaded[run.path] = results_lib.load(os.path.join(out, run.path))
            _say(f'{unit} {number} of {total}: {run.path} done in {took}: final '
                 f'{_score(done["final_accuracy"])}, last-10 '
                 f'{_score(done["last10_accuracy"])} ({len(running)} running, '
                 f'{len(waiting)} waiting)')
          else:
            failed.append(f'{run.path} (exit status {process.returncode}; its output: '
                          f'{log_path(out, run.path)})')
            _say(f'{unit} {number} of {total}: {run.path} failed after {took}; '
                 f'{"no new run starts; " if waiting else ""}{len(running)} still running')
        if running:
          time.sleep(poll_seconds)
    except BaseException:
      _stop(running, study)
      raise
  if failed:
    not_started = f'; {len(waiting)} not started' if waiting else ''
    raise RunsFailed(f"{len(failed)} run(s) failed: {'; '.join(failed)}{not_started}; "
                     f'mend the cause, then continue the {study} with --resume')
  return loaded


def _start(run, number: int, label: str, out: str, configs: str, command) -> tuple:
  """Starts ``run`` (``label``: how its progress lines begin) in a new process; returns
  ``(run, process, log file, start time)``."""
  config_file = os.path.join(configs, f'{number}.json')
  with open(config_file, 'w') as f:
    json.dump(run.config.to_dict(), f)
  if config_lib.load(config_file) != run.config:  # The run must get exactly this config.
    raise RuntimeError(f'the config of {run.path} changes when written to {config_file}')
  argv = command(config_file, os.path.join(out, run.path))
  log = open(log_path(out, run.path), 'a')
  log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(argv)}\n")
  log.flush()
  process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT)
  _say(f'{label}: {run.path} started (its output: '
       f'{log_path(out, run.path)})')
  return run, process, log, time.monotonic()


def _stop(running: dict, study: str) -> None:
  """Stops the running runs as SIGTERM stops a run, then waits for each to exit."""
  for _, process, _, _ in running.values():
    if process.poll() is None:
      process.send_signal(signal.SIGTERM)
  for run, process, log, _ in running.values():
    try:
      process.wait(_STOP_SECONDS)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
    log.close()
    _say(f'[{study}] stopped {run.path}; continue with --resume')


def _score(value) -> str:
  return 'n/a' if value is None else f'{value:.4f}'


def _say(text: str) -> None:
  print(text, file=sys.stderr, flush=True)
