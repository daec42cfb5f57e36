"""A run's output directory: one writer at a time, never mixed with an earlier run.

:func:`claim` refuses an OUT that is a file, or that already holds files while neither
``--resume`` nor ``--overwrite`` was given; it then takes OUT's lock and, with
``--overwrite``, removes the earlier run's outputs. The lock is an ``flock`` on
``OUT/.tff-noisy.lock``, which names its holder (PID, host, start time, command): the
kernel drops it when the holder dies, even by SIGKILL, so a lock left by a dead run is
taken over with a warning and a live one refuses with its holder's name. An OUT that the
claim created is removed again if the run fails before writing anything into it.
"""

import contextlib
import fcntl
import json
import os
import shutil
import socket
import sys
import time

from tff_noisy.errors import UserError, warn
from tff_noisy.simulation import results

LOCK_FILE = '.tff-noisy.lock'
# What a run writes; --overwrite removes these and nothing else.
OUTPUTS = (results.RESULTS_FILE, results.METRICS_FILE, results.WEIGHTS_FILE, 'checkpoints',
           'tb')


class RunDirError(UserError):
  """An output directory cannot be used for this run."""


def check(out_dir: str, *, resume: bool, overwrite: bool) -> None:
  """Raises RunDirError if ``out_dir`` is a file, or holds files and neither flag is set."""
  if os.path.exists(out_dir) and not os.path.isdir(out_dir):
    raise RunDirError(f'--out: {out_dir} is a file, not a directory')
  if resume or overwrite or not os.path.isdir(out_dir):
    return
  entries = sorted(set(os.listdir(out_dir)) - {LOCK_FILE})
  if entries:
    shown = ', '.join(entries[:3]) + (', ...' if len(entries) > 3 else '')
    raise RunDirError(f'--out: {out_dir} is not empty ({shown}); continue that run with '
                      '--resume, replace it with --overwrite, or choose a new --out')


@contextlib.contextmanager
def claim(out_dir: str, *, resume: bool = False, overwrite: bool = False):
  """Holds ``out_dir`` for one writer while the ``with`` block runs.

  Raises:
    RunDirError: see :func:`check`; or another live process holds the lock (the
      message names it); or ``out_dir`` cannot be created.
  """
  check(out_dir, resume=resume, overwrite=overwrite)
  created = not os.path.exists(out_dir)
  try:
    os.makedirs(out_dir, exist_ok=True)
  except OSError as e:
    raise RunDirError(f'--out: cannot create {out_dir}: {e.strerror}') from None
  path = os.path.join(out_dir, LOCK_FILE)
  fd = _lock(path, out_dir)
  try:
    if overwrite:
      for name in OUTPUTS:
        target = os.path.join(out_dir, name)
        if os.path.isdir(target):
          shutil.rmtree(target)
        elif os.path.lexists(target):
          os.remove(target)
    failed = True  # Until the block returns: an exception leaves it set.
    yield
    failed = False
  finally:
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)  # While still locked: a process that opened it retries (_lock).
    os.close(fd)
    if created and failed:  # A run that failed before writing anything leaves no --out.
      with contextlib.suppress(OSError):
        os.rmdir(out_dir)  # Only if empty.


def _lock(path: str, out_dir: str) -> int:
  """Locks ``path`` (created if missing) and writes this process into it; returns its fd."""
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _describe(os.read(fd, 1 << 16))
      os.close(fd)
      raise RunDirError(f'--out: {out_dir} is in use by {holder}; wait for it to finish '
                        'or choose another --out') from None
    with contextlib.suppress(FileNotFoundError):
      if os.path.samestat(os.fstat(fd), os.stat(path)):
        break
    os.close(fd)  # The holder removed the file as we opened it: lock the new one.
  previous = os.read(fd, 1 << 16)
  if previous.strip():
    warn(f'taking over {path} from {_describe(previous)}, which is no longer running')
  holder = {'pid': os.getpid(), 'host': socket.gethostname(),
            'started': time.strftime('%Y-%m-%d %H:%M:%S'), 'command': ' '.join(sys.argv)}
  os.ftruncate(fd, 0)
  os.pwrite(fd, json.dumps(holder).encode(), 0)
  return fd


def _describe(content: bytes) -> str:
  """'PID 12 on host (started ..., `command`)' from a lock file's content."""
  try:
    holder = json.loads(content)
    return (f'PID {holder["pid"]} on {holder["host"]} (started {holder["started"]}: '
            f'`{holder["command"]}`)')
  except (ValueError, TypeError, KeyError):
    return 'another process (its lock file names no holder)'
