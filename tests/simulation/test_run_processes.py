"""``run_processes``: a grid's runs at most ``jobs`` at once, each in its own process, with
the grid's table equal to one run at a time. The processes here stand in for ``tff-noisy
run``: a small Python script that writes the results file the grid reads."""
import csv
import json
import subprocess
import sys
import time

import pytest

from tff_noisy.simulation import run_processes
from tff_noisy.simulation import studies

_CONFIG = {'data': {'dataset': 'digits'}, 'partition': {'name': 'iid', 'num_clients': 4},
           'method': {'name': 'fedln', 'params': {'k': 7, 'activation_round': 2}},
           'fl': {'rounds': 3, 'client_lr': 1e-3}}

# argv: config file, run directory, a file recording each run's start and end. Accuracy
# 0.5 + 0.1 seed (+0.05 for fedln), as in test_studies; exits 3 when told to fail.
_RUN = '''
import json, os, sys, time
from tff_noisy import config as config_lib
from tff_noisy.simulation import results as results_lib
config = config_lib.load(sys.argv[1])
record = open(sys.argv[3], 'a')
record.write(f'start {time.monotonic()}\\n'); record.flush()
time.sleep(float(os.environ.get('RUN_SECONDS', '0.3')))
if config.method.name == os.environ.get('FAIL_METHOD'):
  print('a run that fails', file=sys.stderr)
  sys.exit(3)
accuracy = 0.5 + 0.1 * config.seed + (0.05 if config.method.name == 'fedln' else 0.0)
results_lib.write(sys.argv[2], results_lib.Results(
    config=config.to_dict(), data_hash=config.data_hash(), method=config.method.name,
    params={}, rounds=[{'round': r, 'test_accuracy': accuracy} for r in (1, 2, 3)],
    client_noise_rates={}))
record.write(f'end {time.monotonic()}\\n')
'''


def _grid(tmp_path, jobs, record):
  path = tmp_path / 'c.yaml'
  path.write_text(json.dumps(_CONFIG))
  out = tmp_path / f'grid{jobs}'
  out.mkdir()

  def command(config_file, run_dir):
    return [sys.executable, '-c', _RUN, config_file, run_dir, str(record)]
  table = studies.grid(
      str(path), [], ['fedavg', 'fedln'], [studies.Setting.parse('noise.rate=0.2')], [0, 1],
      str(out), run=None,
      run_all=lambda planned: run_processes.run_all(planned, str(out), jobs, command, 0.02))
  return out, table


def _most_at_once(record) -> int:
  events = sorted((float(t), kind) for kind, t in
                  (line.split() for line in record.read_text().splitlines()))
  at_once = most = 0
  for _, kind in events:
    at_once += 1 if kind == 'start' else -1
    most = max(most, at_once)
  return most


def test_runs_go_at_most_jobs_at_once_and_give_the_tables_of_one_at_a_time(
    tmp_path, capsys):
  record = tmp_path / 'record.txt'
  out, table = _grid(tmp_path, 2, record)
  assert _most_at_once(record) == 2  # Four runs, two at a time.
  assert '| noise.rate=0.2 | 55.00 ± 5.00 / 55.00 ± 5.00 | 60.00 ± 5.00 / 60.00 ± 5.00 |' in (
      table)
  with open(out / 'grid.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  assert [(r['method'], r['seeds'], float(r['final_mean'])) for r in rows] == [
      ('fedavg', '2', pytest.approx(0.55)), ('fedln', '2', pytest.approx(0.6))]
  progress = capsys.readouterr().err
  assert ('[grid] cell 1 of 4: noise.rate-0.2/seed0/fedavg started (its output: '
          f'{out}/logs/noise.rate-0.2__seed0__fedavg.log)') in progress
  assert 'noise.rate-0.2/seed1/fedln done in' in progress
  assert 'final 0.6500, last-10 0.6500' in progress
  # Each run read exactly the config the grid planned for it (the method's own params).
  results = json.loads((out / 'noise.rate-0.2/seed1/fedln/results.json').read_text())
  assert results['config']['method'] == {'name': 'fedln', 'params': {
      'k': 7, 'activation_round': 2}}
  assert results['config']['fl']['client_lr'] == 1e-3 and results['config']['seed'] == 1


def test_one_job_runs_one_at_a_time(tmp_path):
  record = tmp_path / 'record.txt'
  _grid(tmp_path, 1, record)
  assert _most_at_once(record) == 1


def test_a_failed_run_stops_new_ones_and_the_error_names_it_and_its_log(
    tmp_path, monkeypatch):
  monkeypatch.setenv('FAIL_METHOD', 'fedln')
  record = tmp_path / 'record.txt'
  with pytest.raises(run_processes.RunsFailed) as failure:
    _grid(tmp_path, 1, record)
  log = tmp_path / 'grid1/logs/noise.rate-0.2__seed0__fedln.log'
  assert str(failure.value) == (
      f'1 run(s) failed: noise.rate-0.2/seed0/fedln (exit status 3; its output: {log}); '
      '2 not started; mend the cause, then continue the grid with --resume')
  assert 'a run that fails' in log.read_text()
  assert record.read_text().count('start') == 2  # Nothing started after the failure.
  assert not (tmp_path / 'grid1/grid.csv').exists()


def test_an_interrupt_stops_every_running_run(tmp_path, monkeypatch):
  """Ctrl-C (or SIGTERM, raised the same way) while runs are going: each gets SIGTERM
  and has exited when the interrupt goes on up."""
  monkeypatch.setenv('RUN_SECONDS', '60')
  started = []
  real_popen = subprocess.Popen

  def popen(*args, **kwargs):
    started.append(real_popen(*args, **kwargs))
    return started[-1]
  monkeypatch.setattr(subprocess, 'Popen', popen)
  sleeps = []
  real_sleep = time.sleep

  def sleep(seconds):  # The third wait of the grid's loop is interrupted.
    sleeps.append(seconds)
    if len(sleeps) == 3:
      raise KeyboardInterrupt
    real_sleep(seconds)
  monkeypatch.setattr(run_processes.time, 'sleep', sleep)
  with pytest.raises(KeyboardInterrupt):
    _grid(tmp_path, 2, tmp_path / 'record.txt')
  assert len(started) == 2 and all(p.returncode == -15 for p in started)  # SIGTERM.
