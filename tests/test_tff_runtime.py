"""A script that ran a TFF computation exits cleanly: no worker survives, no pipe hangs."""
import os
import signal
import subprocess
import sys

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
