"""A script that ran a TFF computation exits cleanly: no worker survives, no pipe hangs."""
import os
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
