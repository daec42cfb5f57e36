"""Import TensorFlow Federated with its local worker process under control.

The first TFF computation starts a C++ ``worker_binary`` subprocess. TFF stops it from a
``__del__`` that runs during interpreter teardown, when the ``subprocess`` module is
already gone, so the worker outlives Python and keeps the parent's stdout open (a
pipeline reading it hangs). Everything in tff-noisy imports TFF through
:func:`import_tff`, which registers :func:`shutdown_workers` to run at exit while the
modules are still alive.

A parent that dies without running its exit handlers (SIGKILL, a crash) cannot stop the
worker, so on Linux :func:`import_tff` also has TFF start it under a parent-death signal:
the kernel kills the worker when the thread that started it (TFF's event-loop thread,
which lives as long as the process) ends. The worker gets its own session, so a Ctrl-C
at the terminal reaches only Python, which then stops the worker in order.

The worker allocates through jemalloc when the system has it (``libjemalloc.so.2``), not
glibc's malloc: with glibc its many threads' arenas keep the memory they freed, and the
worker grows each round (``benchmarks/soak.py``). ``TFF_NOISY_WORKER_MALLOC`` chooses:
``auto`` (the default: jemalloc when found, else glibc's), ``jemalloc`` (an error
without it) or ``glibc``.
"""

import atexit
import ctypes.util
import functools
import gc
import os
import signal
import subprocess
import sys
import types

from tff_noisy import errors

_registered = False
_shared_context = [None]  # The execution context other threads use (use_in_this_thread).
# Runs in the new process: prctl(PR_SET_PDEATHSIG, SIGKILL), give up if the parent is
# already gone (it would never be signalled), restore SIGINT (a command started as `cmd &`
# passes it on ignored, and the worker would outlive the SIGINT that stops it), then become
# the worker (same PID).
_PDEATHSIG_EXEC = '\n'.join([
    'import ctypes, os, signal, sys',
    'ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)',
    'if os.getppid() != int(sys.argv[1]): sys.exit(1)',
    'signal.signal(signal.SIGINT, signal.SIG_DFL)',
    'os.execv(sys.argv[2], sys.argv[2:])',
])


MALLOC_VARIABLE = 'TFF_NOISY_WORKER_MALLOC'
_MALLOC_CHOICES = ('auto', 'jemalloc', 'glibc')
_JEMALLOC = 'jemalloc'


def worker_preload() -> str:
  """The library the worker preloads for its allocator (``MALLOC_VARIABLE``), or ''.

  Raises ConfigError naming the variable for a value outside ``_MALLOC_CHOICES``, or for
  ``jemalloc`` on a machine without it."""
  choice = os.environ.get(MALLOC_VARIABLE, 'auto').strip().lower() or 'auto'
  if choice not in _MALLOC_CHOICES:
    raise errors.ConfigError(f'{MALLOC_VARIABLE}={os.environ[MALLOC_VARIABLE]!r}: one of '
                     f'{", ".join(_MALLOC_CHOICES)}')
  if choice == 'glibc' or not sys.platform.startswith('linux'):
    return ''
  library = ctypes.util.find_library(_JEMALLOC) or ''
  if choice == 'jemalloc' and not library:
    raise errors.ConfigError(f'{MALLOC_VARIABLE}=jemalloc: no libjemalloc on this machine '
                     '(Debian/Ubuntu: apt-get install libjemalloc2), or choose auto or glibc')
  return library


class WorkerPopen(subprocess.Popen):
  """``Popen`` that starts a command in its own session, killed when its parent dies, its
  allocator ``worker_preload()``'s."""

  def __init__(self, args, *rest, **kwargs):
    wrapped = [sys.executable, '-I', '-S', '-c', _PDEATHSIG_EXEC, str(os.getpid()), *args]
    preload = worker_preload()
    if preload:
      env = dict(kwargs.pop('env', None) or os.environ)
      env['LD_PRELOAD'] = ' '.join(filter(None, (preload, env.get('LD_PRELOAD'))))
      kwargs['env'] = env
    super().__init__(wrapped, *rest, start_new_session=True, **kwargs)


def _worker_processes():
  return [
      obj for obj in gc.get_objects()
      # type() rather than isinstance(): gc also yields dead weak proxies.
      if issubclass(type(obj), subprocess.Popen) and 'worker_binary' in str(obj.args)
  ]


def shutdown_workers(timeout: float = 10.0) -> int:
  """Stops every TFF worker this process started; returns how many were running."""
  stopped = 0
  for process in _worker_processes():
    if process.pid is None or process.poll() is not None:  # Never started, or exited.
      continue
    process.send_signal(signal.SIGINT)
    try:
      process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
    stopped += 1
  return stopped


def _quiet_late_manager_del(unraisable, default_hook):
  """Drops the known teardown failure of TFF's ServiceManager.__del__ (worker already
  stopped); passes any other to ``default_hook``, the hook it replaced."""
  if 'ServiceManager.__del__' in getattr(unraisable.object, '__qualname__', ''):
    return
  default_hook(unraisable)


def _start_workers_with_pdeathsig() -> None:
  """Makes TFF's executor factory start its worker through ``WorkerPopen``."""
  # pylint: disable=g-import-not-at-top
  from tensorflow_federated.python.core.impl.executor_stacks import executor_factory
  # pylint: enable=g-import-not-at-top
  executor_factory.subprocess = types.SimpleNamespace(
      **{**vars(subprocess), 'Popen': WorkerPopen})


def _quiet_grappler() -> None:
  """TFF's Grappler pass prints its routine lines through ``native_log.quiet``."""
  # pylint: disable=g-import-not-at-top
  from tensorflow_federated.python.core.environments.tensorflow_backend import (
      graph_optimizations)
  from tff_noisy import native_log
  # pylint: enable=g-import-not-at-top
  optimizer = graph_optimizations.tf_optimizer
  if not hasattr(optimizer.OptimizeGraph, '__wrapped__'):
    graph_optimizations.tf_optimizer = types.SimpleNamespace(
        **{**vars(optimizer), 'OptimizeGraph': native_log.quietly(optimizer.OptimizeGraph)})


def use_in_this_thread() -> None:
  """Lets the calling thread run TFF computations. TFF installs its execution context only
  in the thread that imports it (its context stack is thread-local; any other thread gets
  "No default context installed"): another thread gets that same context, or, when TFF
  was imported before :func:`import_tff` could keep it, one local context of its own."""
  tff = sys.modules.get('tensorflow_federated')
  if tff is None:  # Importing it here installs the context in this thread.
    return
  stack = tff.framework.get_context_stack()
  if not _has_no_context(stack.current):
    return
  if _shared_context[0] is None:
    _shared_context[0] = tff.backends.native.create_sync_local_cpp_execution_context()
  stack.set_default_context(_shared_context[0])


def _has_no_context(context) -> bool:
  # pylint: disable=g-import-not-at-top
  from tensorflow_federated.python.core.impl.context_stack import runtime_error_context
  # pylint: enable=g-import-not-at-top
  return isinstance(context, runtime_error_context.RuntimeErrorContext)


def import_tff():
  """Returns the ``tensorflow_federated`` module, with worker shutdown registered."""
  global _registered
  if not _registered:
    worker_preload()  # A wrong TFF_NOISY_WORKER_MALLOC fails here, before the worker starts.
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  current = tff.framework.get_context_stack().current
  if _shared_context[0] is None and not _has_no_context(current):
    _shared_context[0] = current  # The importing thread's, for the others.
  if not _registered:
    atexit.register(shutdown_workers)
    sys.unraisablehook = functools.partial(_quiet_late_manager_del,
                                           default_hook=sys.unraisablehook)
    if sys.platform.startswith('linux'):
      _start_workers_with_pdeathsig()
    _quiet_grappler()
    _registered = True
  return tff
