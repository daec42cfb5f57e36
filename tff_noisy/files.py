"""Files written whole or not at all: what a crash or a full disk must not cut in half.

Importable from anywhere (NumPy and ``errors`` only): the data cache, checkpoints and a
run's results all write through ``write_atomically``; what a command writes for a person
(an export, an evaluation, a report) through ``write_file``. What a command reads from a
user's directory (a config, a run's results, a manifest) it opens with ``open_regular``.
"""

import errno
import io
import os
import stat
import tempfile

import numpy as np

from tff_noisy.errors import OutputError, UserError, os_reason

_KINDS = ((stat.S_ISFIFO, 'a FIFO'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISSOCK, 'a socket'))


class NotRegularFile(UserError):
  """A path that must be a regular file is a FIFO, a device or a socket (reading one can
  wait forever for a writer, or never end)."""


def kind(mode: int) -> str:
  """'a FIFO', 'a character device', ... for a ``st_mode`` that is not a regular file."""
  for test, name in _KINDS:
    if test(mode):
      return name
  return 'a directory' if stat.S_ISDIR(mode) else 'not a regular file'


def not_regular(path: str) -> NotRegularFile:
  """The one-line error for ``path``, which ``os.stat`` says is no regular file."""
  what = kind(os.stat(path).st_mode)
  link = ' (through a symlink)' if os.path.islink(path) else ''
  return NotRegularFile(f'{path} is {what}{link}, not a regular file: it is not read (it '
                        'could wait forever or never end); replace it with a file')


def open_regular(path: str, mode: str = 'rb', **kwargs):
  """``open(path, mode, **kwargs)`` for reading, when ``path`` is a regular file (a symlink
  to one is fine). A directory raises IsADirectoryError, as ``open`` does; a FIFO, a device
  or a socket, also behind a symlink, NotRegularFile, without reading it (opened
  non-blocking: a FIFO's open waits for no writer)."""
  fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
  try:
    mode_bits = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode_bits):
      raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not stat.S_ISREG(mode_bits):
      raise not_regular(path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode, **kwargs)
  except BaseException:
    os.close(fd)
    raise


def npz_bytes(*args, **kwargs) -> bytes:
  """``np.savez(file, *args, **kwargs)``'s bytes, built in memory: a full disk then fails
  a plain write, not a zip file half through."""
  content = io.BytesIO()
  np.savez(content, *args, **kwargs)
  return content.getvalue()


def umask() -> int:
  """This process's umask: from /proc on Linux (no change to it), else set and restored."""
  try:
    with open('/proc/self/status') as f:
      for line in f:
        if line.startswith('Umask:'):
          return int(line.split()[1], 8)
  except OSError:
    pass
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


def make_temporary_dir(prefix: str, directory: str) -> str:
  """``tempfile.mkdtemp`` with the mode an ordinary ``mkdir`` gets (0777 less the umask),
  not mkdtemp's private 0700: a checkpoint shared between users stays readable."""
  path = tempfile.mkdtemp(prefix=prefix, dir=directory)
  os.chmod(path, 0o777 & ~umask())
  return path


def write_atomically(path: str, content: bytes) -> None:
  """Writes ``content`` to a file private to this call beside ``path``, flushes it to
  disk and renames it to ``path``: readers see the old file or the whole new one. The file
  gets the mode an ordinary new file gets (0666 less the umask). On an ``OSError`` (disk
  full, no permission) the private file is removed and the error raised; ``path`` is as
  it was."""
  fd, partial = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.',
                                 dir=os.path.dirname(path) or '.')
  try:
    os.fchmod(fd, 0o666 & ~umask())
    with os.fdopen(fd, 'wb') as f:
      f.write(content)
      f.flush()
      os.fsync(f.fileno())
    os.replace(partial, path)
  finally:
    if os.path.exists(partial):
      os.remove(partial)


def write_file(path: str, content: bytes) -> None:
  """``write_atomically`` into ``path``'s folder, created if missing. An ``OSError`` (a
  full disk, a read-only file system, no permission) is an ``OutputError`` in one line
  naming ``path`` and why; ``path`` is as it was."""
  try:
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    write_atomically(path, content)
  except OSError as e:
    raise OutputError(f'cannot write {path}: {os_reason(e)}') from None


def portable_path(path: str, root: str) -> str:
  """``path`` as a committed file may name it: relative to ``root`` (the repository) when
  it lies inside it, else only its base name, so no machine's directories are recorded."""
  absolute = os.path.abspath(path)
  root = os.path.abspath(root)
  if os.path.commonpath([absolute, root]) == root:
    return os.path.relpath(absolute, root)
  return os.path.basename(absolute.rstrip(os.sep)) or absolute


def portable_overrides(overrides, root: str) -> list:
  """Config overrides ``key=value`` with every absolute-path value through
  ``portable_path``, e.g. ``data.cache_dir=/tmp/cache`` -> ``data.cache_dir=cache``."""
  out = []
  for item in overrides:
    key, sep, value = item.partition('=')
    if sep and os.path.isabs(value):
      value = portable_path(value, root)
    out.append(key + sep + value)
  return out
