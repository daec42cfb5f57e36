"""Output directories: no mixing with an earlier run, one writer at a time."""
import errno
import os
import signal
import subprocess
import sys

import pytest

from tff_noisy.simulation import run_dir

_HOLD = """
import sys, time
from tff_noisy.simulation import run_dir
with run_dir.claim(sys.argv[1], resume=True):
  print('holding', flush=True)
  time.sleep(600)
"""


def _earlier_run(out):
  for name in ('results.json', 'metrics.csv', 'final_weights.npz', 'notes.txt'):
    (out / name).write_text('x')
  for name in ('checkpoints/round_00002', 'tb'):
    (out / name).mkdir(parents=True)


def test_new_and_empty_directories_are_claimed_and_released(tmp_path):
  (tmp_path / 'empty').mkdir()
  for out in (tmp_path / 'new' / 'nested', tmp_path / 'empty'):
    with run_dir.claim(str(out)):
      assert (out / run_dir.LOCK_FILE).read_text().startswith('{"pid": ' + str(os.getpid()))
    assert list(out.iterdir()) == []


def test_non_empty_directory_needs_resume_or_overwrite(tmp_path):
  _earlier_run(tmp_path)
  with pytest.raises(run_dir.RunDirError, match=r'--out: .* is not empty \(checkpoints, '
                     r'final_weights.npz, metrics.csv, \.\.\.\); continue that run with '
                     r'--resume, replace it with --overwrite'):
    with run_dir.claim(str(tmp_path)):
      pass
  with run_dir.claim(str(tmp_path), resume=True):
    assert (tmp_path / 'checkpoints' / 'round_00002').is_dir()
  with pytest.raises(run_dir.RunDirError, match=r'--overwrite: .* holds files tff-noisy did '
                     r'not write \(notes.txt\); move them away'):
    with run_dir.claim(str(tmp_path), overwrite=True):
      pass
  assert (tmp_path / 'results.json').exists()  # Nothing removed.
  (tmp_path / 'notes.txt').unlink()
  with run_dir.claim(str(tmp_path), overwrite=True):
    assert sorted(p.name for p in tmp_path.iterdir()) == [run_dir.LOCK_FILE]


def test_overwrite_removes_every_earlier_output_and_refuses_what_it_did_not_write(tmp_path):
  run = tmp_path / 'run'
  for name in ('checkpoints/round_00005', 'checkpoints/.round_00006.abc', 'tb'):
    (run / name).mkdir(parents=True)
  for name in ('results.json', 'metrics.csv', 'final_weights.npz', 'evaluation.json',
               'report.md', 'report-accuracy.png', 'model_none.tflite', 'model_none.json',
               '.results.json.k2j3', 'tb/events.out.tfevents.1.host.2.v2'):
    (run / name).write_text('x')
  (run / 'checkpoints' / 'model_epoch90.pt').write_text('theirs')
  (run / 'tb' / 'events.other').write_text('theirs')
  with pytest.raises(run_dir.RunDirError, match=r'\(checkpoints/model_epoch90.pt, '
                                                r'tb/events.other\)'):
    with run_dir.claim(str(run), overwrite=True):
      pass
  assert (run / 'checkpoints' / 'round_00005').is_dir() and (run / 'report.md').exists()
  (run / 'checkpoints' / 'model_epoch90.pt').unlink()
  (run / 'tb' / 'events.other').unlink()
  with run_dir.claim(str(run), overwrite=True):
    assert sorted(p.name for p in run.iterdir()) == [run_dir.LOCK_FILE]


def test_overwrite_of_a_study_removes_the_runs_its_manifest_lists(tmp_path):
  study = tmp_path / 'study'
  (study / 'logs').mkdir(parents=True)
  (study / 'logs' / 'fedavg.log').write_text('x')
  for path in ('0.4/seed0/fedavg', '0.4/seed0/fedefc', 'fedavg'):
    (study / path / 'checkpoints').mkdir(parents=True)
    (study / path / 'results.json').write_text('x')
  (study / 'manifest.json').write_text(
      '{"runs": [{"path": "0.4/seed0/fedavg"}, {"path": "0.4/seed0/fedefc"}, '
      '{"path": "fedavg"}]}')
  for name in ('grid.csv', 'grid.md', 'report.md', 'comparison.csv'):
    (study / name).write_text('x')
  (study / '0.4' / 'seed0' / 'mine.txt').write_text('theirs')
  with pytest.raises(run_dir.RunDirError, match=r'\(0.4/seed0/mine.txt\)'):
    with run_dir.claim(str(study), overwrite=True):
      pass
  (study / '0.4' / 'seed0' / 'mine.txt').unlink()
  with run_dir.claim(str(study), overwrite=True):
    assert sorted(p.name for p in study.iterdir()) == [run_dir.LOCK_FILE]


def test_commands_that_read_a_run_refuse_one_still_running(tmp_path):
  run_dir.refuse_if_running(str(tmp_path), 'export')  # No lock: nothing running.
  process = _holder(tmp_path)
  try:
    with pytest.raises(run_dir.RunDirError, match=r'export: .* is still being written by PID'):
      run_dir.refuse_if_running(str(tmp_path), 'export')
  finally:
    process.kill()
    process.wait()
  run_dir.refuse_if_running(str(tmp_path), 'export')  # Its lock died with it.


def test_out_that_is_a_file_is_refused(tmp_path):
  (tmp_path / 'f').write_text('x')
  for flags in ({}, {'resume': True}, {'overwrite': True}):
    with pytest.raises(run_dir.RunDirError, match='--out: .*/f is a file, not a directory'):
      with run_dir.claim(str(tmp_path / 'f'), **flags):
        pass


def _holder(out):
  process = subprocess.Popen([sys.executable, '-c', _HOLD, str(out)], stdout=subprocess.PIPE,
                             text=True)
  assert process.stdout.readline().strip() == 'holding'
  return process


def test_second_writer_is_refused_naming_the_first(tmp_path):
  holder = _holder(tmp_path)
  try:
    with pytest.raises(run_dir.RunDirError) as error:
      with run_dir.claim(str(tmp_path), resume=True):
        pass
    message = str(error.value)
    assert f'is in use by PID {holder.pid} on ' in message and '-c' in message
    assert 'choose another --out' in message
  finally:
    holder.send_signal(signal.SIGTERM)
    holder.wait()


def test_lock_of_a_killed_run_is_taken_over_with_a_warning(tmp_path, capsys):
  holder = _holder(tmp_path)
  holder.kill()  # SIGKILL: the lock file stays, naming a dead process.
  holder.wait()
  assert f'"pid": {holder.pid}' in (tmp_path / run_dir.LOCK_FILE).read_text()
  with run_dir.claim(str(tmp_path), resume=True):
    pass
  warning = capsys.readouterr().err.strip()
  assert warning.startswith('tff-noisy: warning: taking over ')
  assert f'PID {holder.pid}' in warning and 'no longer running' in warning
  assert '\n' not in warning


def test_lock_is_released_when_the_run_fails(tmp_path):
  with pytest.raises(KeyboardInterrupt):
    with run_dir.claim(str(tmp_path)):
      raise KeyboardInterrupt
  assert not (tmp_path / run_dir.LOCK_FILE).exists()
  with run_dir.claim(str(tmp_path)):
    pass


def test_a_run_that_fails_before_writing_leaves_no_out_it_created(tmp_path):
  (tmp_path / 'existing').mkdir()
  for out, kept in ((tmp_path / 'new', False), (tmp_path / 'wrote', True),
                    (tmp_path / 'existing', True)):  # Existed before: kept, even empty.
    with pytest.raises(ValueError):
      with run_dir.claim(str(out)):
        if out.name == 'wrote':
          (out / 'tb').mkdir()
        raise ValueError('early failure')
    assert out.exists() == kept


def test_an_out_on_a_read_only_file_system_is_refused_in_one_line(tmp_path, monkeypatch,
                                                                   capsys):
  """An existing ``--out`` the run cannot write into (a read-only file system; root
  ignores permission bits, so the file system's refusal is simulated): one line, exit 2."""
  from experiments import run as cli  # pylint: disable=g-import-not-at-top
  real_open = os.open

  def read_only(path, flags, *args, **kwargs):
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
      raise OSError(errno.EROFS, 'Read-only file system', path)
    return real_open(path, flags, *args, **kwargs)

  monkeypatch.setattr(os, 'open', read_only)
  config = os.path.join(os.path.dirname(__file__), '..', '..', 'experiments', 'configs',
                        'demo.yaml')
  for flags in ([], ['--resume']):
    with pytest.raises(SystemExit) as exit_info:
      cli.main(['run', config, '--out', str(tmp_path), *flags])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f'tff-noisy: error: --out: cannot write into {tmp_path}: Read-only file system']
  assert os.listdir(tmp_path) == []
