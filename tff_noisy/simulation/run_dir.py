"""A run's output directory: one writer at a time, never mixed with an earlier run.

:func:`claim` refuses an OUT that is a file, or that already holds files while neither
``--resume`` nor ``--overwrite`` was given; it then takes OUT's lock and, with
``--overwrite``, removes the earlier run's outputs. The lock is an ``flock`` on
``OUT/.tff-noisy.lock``, which names its holder (PID, host, start time, command): the
kernel drops it when the holder dies, even by SIGKILL, so a lock left by a dead run is
taken over with a warning and a live one refuses with its holder's name. An OUT that the
claim created is removed again if the run fails before writing anything into it.

``--overwrite`` removes only what this project writes (``project_files``: a run's files
by name, and a study's runs as its ``manifest.json`` lists them), so the new run starts
with nothing of the old one beside it; anything else in the way is named and refused
before anything is removed. ``refuse_if_running`` keeps ``export``, ``evaluate`` and
``report`` out of a directory whose run is still going.

The command line and the Python API (``tff_noisy.run``/``compare`` with ``out=``) claim a
directory alike; only the names their messages give the options differ (``Flags``).
``run_experiment`` is one run in a claimed directory, for both.
"""

import contextlib
import fcntl
import fnmatch
import json
import os
import shutil
import socket
import stat
import sys
import time
from typing import NamedTuple

from tff_noisy import device as device_lib
from tff_noisy import files
from tff_noisy.errors import UserError, os_reason, warn
from tff_noisy.simulation import results

LOCK_FILE = '.tff-noisy.lock'
MANIFEST_FILE = 'manifest.json'  # A study's plan (``studies.write_manifest``).
# What the project writes into a run's or a study's directory, by name (``fnmatch``): a
# run's results, ``evaluate``'s, ``report``'s and ``export``'s files, a study's tables
# and the record ``report --publish`` leaves in a folder it published to.
_FILES = (LOCK_FILE, results.RESULTS_FILE, results.METRICS_FILE, results.WEIGHTS_FILE,
          'evaluation.json', 'report.md', 'report-*.png', 'report-*.pdf', 'model_*.tflite',
          'model_*.json', 'client_training.tflite', 'client_training.json', MANIFEST_FILE,
          'comparison.csv', 'comparison.png', 'grid.csv', 'grid.md', 'published.json')
# Folders it writes, with what it writes inside them.
_FOLDERS = {'checkpoints': ('round_[0-9]*', '.round_*'), 'tb': ('events.out.tfevents.*',),
            'logs': ('*.log',)}


class RunDirError(UserError, ValueError):
  """An output directory cannot be used for this run (from Python: a ValueError)."""


class Flags(NamedTuple):
  """What the messages call the output directory and the two ways of reusing it."""
  out: str
  resume: str
  overwrite: str


COMMAND_LINE = Flags('--out', '--resume', '--overwrite')
PYTHON = Flags('out', 'resume=True', 'overwrite=True')


def check(out_dir: str, *, resume: bool, overwrite: bool,
          flags: Flags = COMMAND_LINE) -> None:
  """Raises RunDirError if ``out_dir`` is a file, or holds files and neither flag is set."""
  if os.path.exists(out_dir) and not os.path.isdir(out_dir):
    raise RunDirError(f'{flags.out}: {out_dir} is a file, not a directory')
  if resume or overwrite or not os.path.isdir(out_dir):
    return
  entries = sorted(set(os.listdir(out_dir)) - {LOCK_FILE})
  if entries:
    shown = ', '.join(entries[:3]) + (', ...' if len(entries) > 3 else '')
    raise RunDirError(f'{flags.out}: {out_dir} is not empty ({shown}); continue that run '
                      f'with {flags.resume}, replace it with {flags.overwrite}, or choose a '
                      f'new {flags.out}')


def project_files(out_dir: str) -> tuple:
  """``(ours, foreign)``: the names in ``out_dir`` this project wrote (a run's files and
  folders, the runs its study manifest lists) and the paths of everything else."""
  ours, foreign = [], []
  runs = _manifest_runs(out_dir)
  for name in sorted(os.listdir(out_dir)):
    path = os.path.join(out_dir, name)
    if name in runs and os.path.isdir(path):
      strange = [f'{name}/{f}' for f in _study_part_foreign(path, runs[name])]
    elif name in _FOLDERS and os.path.isdir(path) and not os.path.islink(path):
      strange = [f'{name}/{n}' for n in sorted(os.listdir(path))
                 if not any(fnmatch.fnmatch(n, p) for p in _FOLDERS[name])]
    elif _is_project_file(name) and not os.path.isdir(path):
      strange = []
    else:
      strange = [name]
    (foreign.extend(strange) if strange else ours.append(name))
  return ours, foreign


def _is_project_file(name: str) -> bool:
  """A file the project writes, or what a write cut short left of one (``files``)."""
  return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(name, f'.{p}.*') for p in _FILES)


def _manifest_runs(directory: str) -> dict:
  """``{first path part: [the rest of each run path]}`` of the study manifest in
  ``directory``; {} without one."""
  try:
    with files.open_regular(os.path.join(directory, MANIFEST_FILE), 'r') as f:
      paths = [str(run['path']) for run in json.load(f)['runs']]
  except (OSError, ValueError, KeyError, TypeError):
    return {}
  runs = {}
  for path in paths:
    first, _, rest = path.replace(os.sep, '/').partition('/')
    runs.setdefault(first, []).append(rest)
  return runs


def _study_part_foreign(path: str, rests: list) -> list:
  """What the project did not write under a study's run (``rests`` holds '') or folder of
  runs (``rests``: the runs' paths below it), relative to ``path``."""
  if '' in rests:
    return project_files(path)[1]
  deeper = {}
  for rest in rests:
    first, _, remainder = rest.partition('/')
    deeper.setdefault(first, []).append(remainder)
  foreign = []
  for name in sorted(os.listdir(path)):
    if name in deeper and os.path.isdir(os.path.join(path, name)):
      foreign += [f'{name}/{f}' for f in _study_part_foreign(os.path.join(path, name),
                                                             deeper[name])]
    else:
      foreign.append(name)
  return foreign


def _remove_earlier_outputs(out_dir: str, flags: Flags) -> None:
  """``--overwrite``: removes what the project wrote in ``out_dir``, or raises
  RunDirError naming what it did not write (and removes nothing)."""
  ours, foreign = project_files(out_dir)
  if foreign:
    shown = ', '.join(foreign[:5]) + (f', ... ({len(foreign)} in all)' if len(foreign) > 5
                                      else '')
    raise RunDirError(f'{flags.overwrite}: {out_dir} holds files tff-noisy did not write '
                      f'({shown}); move them away or choose another {flags.out} '
                      f"({flags.overwrite} removes only a run's own outputs)")
  for name in ours:
    if name == LOCK_FILE:
      continue
    target = os.path.join(out_dir, name)
    if os.path.isdir(target) and not os.path.islink(target):
      shutil.rmtree(target)
    else:
      os.remove(target)


def refuse_if_running(directory: str, command: str) -> None:
  """Raises RunDirError when a live run holds ``directory``'s lock: what ``command`` would
  write there would be stale when that run ends."""
  path = os.path.join(directory, LOCK_FILE)
  _refuse_odd_lock(path, command)
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
  except OSError:
    return
  try:
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # Replaced since the check.
      raise _odd_lock(path, command)
    try:
      fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _describe(os.read(fd, 1 << 16))
      raise RunDirError(f'{command}: {directory} is still being written by {holder}; run '
                        f'{command} when it has finished') from None
    fcntl.flock(fd, fcntl.LOCK_UN)
  finally:
    os.close(fd)


@contextlib.contextmanager
def claim(out_dir: str, *, resume: bool = False, overwrite: bool = False,
          flags: Flags = COMMAND_LINE):
  """Holds ``out_dir`` for one writer while the ``with`` block runs; ``flags``: the
  names the messages give the options.

  Raises:
    RunDirError: see :func:`check`; or another live process holds the lock (the
      message names it); or ``out_dir`` cannot be created or written into (a read-only
      file system, no permission).
  """
  check(out_dir, resume=resume, overwrite=overwrite, flags=flags)
  created = not os.path.exists(out_dir)
  try:
    os.makedirs(out_dir, exist_ok=True)
  except OSError as e:
    raise RunDirError(f'{flags.out}: cannot create {out_dir}: {os_reason(e)}') from None
  path = os.path.join(out_dir, LOCK_FILE)
  try:
    fd = _lock(path, out_dir, flags)
  except OSError as e:
    raise RunDirError(f'{flags.out}: cannot write into {out_dir}: {os_reason(e)}') from None
  try:
    if overwrite:
      try:
        _remove_earlier_outputs(out_dir, flags)
      except OSError as e:
        raise RunDirError(f'{flags.overwrite}: cannot remove the earlier run in {out_dir}: '
                          f'{os_reason(e)}') from None
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


def _lock(path: str, out_dir: str, flags: Flags) -> int:
  """Locks ``path`` (created if missing) and writes this process into it; returns its fd."""
  while True:
    _refuse_odd_lock(path, flags.out)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # Replaced since the check.
      os.close(fd)
      raise _odd_lock(path, flags.out)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _describe(os.read(fd, 1 << 16))
      os.close(fd)
      raise RunDirError(f'{flags.out}: {out_dir} is in use by {holder}; wait for it to '
                        f'finish or choose another {flags.out}') from None
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


def _refuse_odd_lock(path: str, what: str) -> None:
  """Raises RunDirError when ``path`` exists and is not a regular file: a symlink (the
  lock's writes would land in its target) or a FIFO, a device or a socket (reading one
  can wait forever); checked before it is opened."""
  try:
    mode = os.lstat(path).st_mode
  except FileNotFoundError:
    return
  if not stat.S_ISREG(mode):
    raise _odd_lock(path, what)


def _odd_lock(path: str, what: str) -> RunDirError:
  mode = os.lstat(path).st_mode
  shown = 'a symlink' if stat.S_ISLNK(mode) else files.kind(mode)
  return RunDirError(f'{what}: {path} is {shown}, not the regular file tff-noisy locks a '
                     'run with; it is not opened: remove it if no tff-noisy run is using '
                     'this directory')


def _describe(content: bytes) -> str:
  """'PID 12 on host (started ..., `command`)' from a lock file's content."""
  try:
    holder = json.loads(content)
    return (f'PID {holder["pid"]} on {holder["host"]} (started {holder["started"]}: '
            f'`{holder["command"]}`)')
  except (ValueError, TypeError, KeyError):
    return 'another process (its lock file names no holder)'


def run_experiment(config, out_dir, *, resume: bool = False, overwrite: bool = False,
                   flags: Flags = COMMAND_LINE, **options):
  """``driver.run_experiment(config, out_dir, resume=resume, **options)`` while holding
  ``out_dir`` (``claim``); with ``out_dir`` None, in memory. TensorFlow is imported once
  the directory is held (a refused one costs no start-up)."""
  with (contextlib.nullcontext() if out_dir is None else
        claim(out_dir, resume=resume, overwrite=overwrite, flags=flags)):
    device_lib.hide_gpus_before_tensorflow(config.device)  # device: cpu, if TF not loaded.
    from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
    return driver.run_experiment(config, out_dir, resume=resume, **options)
