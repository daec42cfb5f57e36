"""Import TensorFlow Federated with its local worker process under control.

The first TFF computation starts a C++ ``worker_binary`` subprocess. TFF stops it from a
``__del__`` that runs during interpreter teardown, when the ``subprocess`` module is
already gone, so the worker outlives Python and keeps the parent's stdout open (a
pipeline reading it hangs). Everything in tff-noisy imports TFF through
:func:`import_tff`, which registers :func:`shutdown_workers` to run at exit while the
modules are still alive.
"""

import atexit
import gc
import signal
import subprocess
import sys

_registered = False


def _worker_processes():
  return [
      obj for obj in gc.get_objects()
      # type() rather than isinstance(): gc also yields dead weak proxies.
      if type(obj) is subprocess.Popen and 'worker_binary' in str(obj.args)
  ]


def shutdown_workers(timeout: float = 10.0) -> int:
  """Stops every TFF worker this process started; returns how many were running."""
  stopped = 0
  for process in _worker_processes():
    if process.poll() is not None:
      continue
    process.send_signal(signal.SIGINT)
    try:
      process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
    stopped += 1
  return stopped


def _quiet_late_manager_del(unraisable, default_hook=sys.unraisablehook):
  """Drops the known teardown failure of TFF's ServiceManager.__del__ (worker already stopped)."""
  if 'ServiceManager.__del__' in getattr(unraisable.object, '__qualname__', ''):
    return
  default_hook(unraisable)


def import_tff():
  """Returns the ``tensorflow_federated`` module, with worker shutdown registered."""
  global _registered
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  if not _registered:
    atexit.register(shutdown_workers)
    sys.unraisablehook = _quiet_late_manager_del
    _registered = True
  return tff
