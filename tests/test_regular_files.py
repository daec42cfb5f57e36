"""What a command opens in a user's directory must be a regular file: a FIFO, a device or
a socket there (also behind a symlink) is one line naming it and is never read (reading a
FIFO waits for a writer that never comes; a device may never end), and the run
directory's lock is never a symlink (the lock's writes would land in its target).

Every call that read such a file hung before; here each one runs where a hang cannot stop
the test: in a subprocess with a timeout, or with a writer that opens the FIFO after
``_UNBLOCK`` seconds, which a reader still waiting then notices by the time it took.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from tff_noisy import config as config_lib
from tff_noisy import files
from tff_noisy.simulation import results
from tff_noisy.simulation import run_dir
from tff_noisy.simulation import studies

_ROOT = os.path.join(os.path.dirname(__file__), '..')
_DEMO = os.path.join(_ROOT, 'experiments', 'configs', 'demo.yaml')
_UNBLOCK = 5.0


def _fifo(path):
  os.mkfifo(path)


def _device(path):
  os.symlink('/dev/zero', path)


def _socket(path):
  server = socket.socket(socket.AF_UNIX)
  server.bind(str(path))
  return server


def _unblock_later(path):
  """Writes a line into the FIFO ``path`` after _UNBLOCK s: a reader blocked on it then
  gets it (and end of file) instead of waiting forever."""
  def write():
    with open(os.open(str(path), os.O_WRONLY), 'wb') as f:
      f.write(b'{}\n')
  timer = threading.Timer(_UNBLOCK, write)
  timer.daemon = True
  timer.start()
  return timer


def _quick(call, fifo):
  """``call()``'s exception, raised within a second: a FIFO's reader is released after
  _UNBLOCK s, which fails the timing instead of hanging the test."""
  timer = _unblock_later(fifo)
  began = time.monotonic()
  try:
    call()
  except Exception as e:  # pylint: disable=broad-except
    error = e
  else:
    error = None
  elapsed = time.monotonic() - began
  if elapsed < _UNBLOCK:
    timer.cancel()
  else:
    timer.join()
  assert elapsed < 1.0, f'waited {elapsed:.1f} s on the FIFO'
  return error


def test_open_regular_reads_files_and_refuses_the_rest(tmp_path):
  (tmp_path / 'a.json').write_text('{}')
  os.symlink(tmp_path / 'a.json', tmp_path / 'link.json')
  for name in ('a.json', 'link.json'):
    with files.open_regular(str(tmp_path / name), 'r') as f:
      assert f.read() == '{}'
  with pytest.raises(IsADirectoryError):
    files.open_regular(str(tmp_path))
  _fifo(tmp_path / 'fifo')
  error = _quick(lambda: files.open_regular(str(tmp_path / 'fifo')), tmp_path / 'fifo')
  assert isinstance(error, files.NotRegularFile)
  assert str(error).startswith(f'{tmp_path / "fifo"} is a FIFO, not a regular file: it is '
                               'not read'), error
  _device(tmp_path / 'dev')
  with pytest.raises(files.NotRegularFile,
                     match=r'dev is a character device \(through a symlink\), not a regular'):
    files.open_regular(str(tmp_path / 'dev'))
  with _socket(tmp_path / 'sock'):
    with pytest.raises(OSError):  # A socket cannot be opened at all.
      files.open_regular(str(tmp_path / 'sock'))


@pytest.mark.parametrize('name, read', [
    ('results.json', lambda d: results.load(d)),
    ('final_weights.npz', lambda d: results.load_final_weights(d)),
    ('manifest.json', lambda d: studies.read_manifest(d)),
])
def test_a_run_s_files_are_refused_when_not_regular(tmp_path, name, read):
  _fifo(tmp_path / name)
  error = _quick(lambda: read(str(tmp_path)), tmp_path / name)
  assert isinstance(error, files.NotRegularFile), error
  assert f'{name} is a FIFO, not a regular file' in str(error)


def test_a_config_that_is_a_fifo_is_one_config_error(tmp_path):
  _fifo(tmp_path / 'config.yaml')
  error = _quick(lambda: config_lib.load(str(tmp_path / 'config.yaml')),
                 tmp_path / 'config.yaml')
  assert isinstance(error, config_lib.ConfigError), error
  assert str(error).startswith(f'config file {tmp_path / "config.yaml"} is a FIFO, not a '
                               'regular file'), error


@pytest.mark.parametrize('damage, what', [(_fifo, 'a FIFO'), (_device, 'a symlink')])
def test_a_lock_that_is_no_regular_file_is_refused_not_opened(tmp_path, damage, what):
  out = tmp_path / 'out'
  out.mkdir()
  damage(out / run_dir.LOCK_FILE)
  lock = out / run_dir.LOCK_FILE

  def claim():
    with run_dir.claim(str(out), resume=True):
      pass

  for call, prefix in ((claim, '--out'),
                       (lambda: run_dir.refuse_if_running(str(out), 'export'), 'export')):
    error = (_quick(call, lock) if damage is _fifo else
             pytest.raises(run_dir.RunDirError, call).value)
    assert isinstance(error, run_dir.RunDirError), error
    assert str(error) == (f'{prefix}: {lock} is {what}, not the regular file tff-noisy '
                          'locks a run with; it is not opened: remove it if no tff-noisy run '
                          'is using this directory')
  assert os.path.lexists(lock)  # Left for the user.


def test_a_lock_symlinked_to_a_file_leaves_that_file_alone(tmp_path):
  """Before, the holder's record was written into the symlink's target."""
  target = tmp_path / 'notes.txt'
  target.write_text('my notes\n')
  out = tmp_path / 'out'
  out.mkdir()
  os.symlink(target, out / run_dir.LOCK_FILE)
  with pytest.raises(run_dir.RunDirError, match=r'\.tff-noisy\.lock is a symlink, not the'):
    with run_dir.claim(str(out), resume=True):
      pass
  assert target.read_text() == 'my notes\n'
  assert os.path.islink(out / run_dir.LOCK_FILE)


def _cli(*args, timeout=60):
  return subprocess.run([sys.executable, '-m', 'experiments.run', *args], cwd=_ROOT,
                        capture_output=True, text=True, timeout=timeout)


def _finished_looking_run(out):
  out.mkdir()
  (out / 'results.json').write_text(json.dumps({'config': {}}))


@pytest.mark.parametrize('command, setup, message', [
    (['run', _DEMO, '--out', '{out}', '--resume'],
     lambda out: (out.mkdir(), _fifo(out / run_dir.LOCK_FILE)),
     '--out: {out}/.tff-noisy.lock is a FIFO, not the regular file tff-noisy locks'),
    (['run', _DEMO, '--out', '{out}', '--resume'],
     lambda out: (out.mkdir(), _device(out / run_dir.LOCK_FILE)),
     '--out: {out}/.tff-noisy.lock is a symlink, not the regular file'),
    (['export', '{out}'],
     lambda out: (_finished_looking_run(out), _fifo(out / run_dir.LOCK_FILE)),
     'export: {out}/.tff-noisy.lock is a FIFO'),
    (['report', '{out}'],
     lambda out: (_finished_looking_run(out), _fifo(out / run_dir.LOCK_FILE)),
     'report: {out}/.tff-noisy.lock is a FIFO'),
    (['report', '{out}'],
     lambda out: (out.mkdir(), _fifo(out / 'results.json')),
     '{out}/./results.json is a FIFO, not a regular file'),
    (['run', _DEMO, '--out', '{out}', '--overwrite'],
     lambda out: (out.mkdir(), _fifo(out / 'manifest.json')),
     '{out}/manifest.json is a FIFO, not a regular file'),
    (['run', '{out}.yaml', '--out', '{out}'],
     lambda out: _fifo(f'{out}.yaml'),
     'config file {out}.yaml is a FIFO, not a regular file'),
])
def test_the_command_line_refuses_them_in_one_line(tmp_path, command, setup, message):
  out = tmp_path / 'out'
  setup(out)
  done = _cli(*[part.format(out=out) for part in command])
  assert done.returncode == 2, done.stderr
  assert done.stderr.startswith(f'tff-noisy: error: {message.format(out=out)}') and (
      done.stderr.count('\n') == 1), done.stderr
