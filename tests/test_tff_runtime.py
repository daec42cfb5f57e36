"""A script that ran a TFF computation exits cleanly: no worker survives, no pipe hangs."""
import os
import signal
import subprocess
import sys

import pytest

from tff_noisy import errors

_SCRIPT = """
import tensorflow as tf
from tff_noisy import tff_runtime
tff = tff_runtime.import_tff()

@tff.tensorflow.computation(tf.int32)
def add_one(x):
  return x + 1

assert add_one(1) == 2
print('worker pids', *[p.pid for p in tff_runtime._worker_processes()])
"""


def _alive(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split()[2] != 'Z'
  except FileNotFoundError:
    return False


def test_worker_stopped_at_exit_and_stdout_closed():
  # capture_output reads stdout to EOF: a surviving worker holding it would time out.
  done = subprocess.run([sys.executable, '-c', _SCRIPT], capture_output=True, text=True,
                        timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert done.returncode == 0, done.stderr[-2000:]
  line = [l for l in done.stdout.splitlines() if l.startswith('worker pids')][0]
  pids = [int(p) for p in line.split()[2:]]
  assert pids, 'the computation should have started a TFF worker'
  assert not any(_alive(pid) for pid in pids)
  assert 'ServiceManager' not in done.stderr


def test_a_worker_stops_at_once_when_sigint_was_inherited_as_ignored():
  """A command started as `cmd &` from a script inherits SIGINT ignored; the worker must
  still stop on the SIGINT its shutdown sends, not after the 10 s wait and a kill."""
  script = _SCRIPT + """
import time
began = time.monotonic()
assert tff_runtime.shutdown_workers() == 1
print('stopped in', time.monotonic() - began)
"""
  done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                        timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'),
                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
  assert done.returncode == 0, done.stderr[-2000:]
  seconds = float([l for l in done.stdout.splitlines() if l.startswith('stopped in')][0]
                  .split()[2])
  assert seconds < 5, seconds


def test_worker_preload_follows_the_variable(monkeypatch):
  from tff_noisy import tff_runtime
  monkeypatch.setattr(tff_runtime.ctypes.util, 'find_library',
                      lambda name: 'libjemalloc.so.2' if name == 'jemalloc' else None)
  for value, preload in (('', 'libjemalloc.so.2'), ('auto', 'libjemalloc.so.2'),
                         ('JEMALLOC', 'libjemalloc.so.2'), ('glibc', '')):
    monkeypatch.setenv(tff_runtime.MALLOC_VARIABLE, value)
    assert tff_runtime.worker_preload() == preload, value
  monkeypatch.setenv(tff_runtime.MALLOC_VARIABLE, 'tcmalloc')
  with pytest.raises(errors.ConfigError, match="TFF_NOISY_WORKER_MALLOC='tcmalloc': one of auto"):
    tff_runtime.worker_preload()
  monkeypatch.setattr(tff_runtime.ctypes.util, 'find_library', lambda name: None)
  monkeypatch.setenv(tff_runtime.MALLOC_VARIABLE, 'auto')
  assert tff_runtime.worker_preload() == ''
  monkeypatch.setenv(tff_runtime.MALLOC_VARIABLE, 'jemalloc')
  with pytest.raises(errors.ConfigError, match='no libjemalloc on this machine'):
    tff_runtime.worker_preload()


def test_the_worker_allocates_through_jemalloc_when_the_machine_has_it():
  import ctypes.util
  if not ctypes.util.find_library('jemalloc'):
    pytest.skip('no libjemalloc on this machine (apt-get install libjemalloc2)')
  script = _SCRIPT + """
for process in tff_runtime._worker_processes():
  with open(f'/proc/{process.pid}/maps') as f:
    print('jemalloc mapped', 'libjemalloc' in f.read())
"""
  for choice, mapped in (('auto', 'True'), ('glibc', 'False')):
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
                                                TFF_NOISY_WORKER_MALLOC=choice))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f'jemalloc mapped {mapped}' in done.stdout, (choice, done.stdout)


def test_a_wrong_allocator_choice_is_one_line_before_any_work(tmp_path):
  done = subprocess.run(
      [sys.executable, '-m', 'experiments.run', 'run', 'experiments/configs/demo.yaml',
       '--out', str(tmp_path / 'run')], capture_output=True, text=True, timeout=300,
      cwd=os.path.join(os.path.dirname(__file__), '..'),
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', TFF_NOISY_WORKER_MALLOC='tcmalloc'))
  assert done.returncode == 2, done.stderr[-2000:]
  assert done.stderr.strip().splitlines()[-1] == (
      "tff-noisy: error: TFF_NOISY_WORKER_MALLOC='tcmalloc': one of auto, jemalloc, glibc")
  assert 'Traceback' not in done.stderr and not (tmp_path / 'run').exists()
