"""What the command line reports to a person: one-line errors and warnings, no traceback.

Importable from anywhere without an import cycle (it imports nothing of the project).
"""

import errno
import reprlib
import sys

PROG = 'tff-noisy'


class UserError(Exception):
  """Bad input or on-disk state, reported as one ``tff-noisy: error:`` line (exit 2)."""


class ConfigError(UserError, ValueError):
  """A configuration value is missing, unknown or outside what is allowed."""


class OutputError(UserError):
  """A run's output (results, weights, a checkpoint) could not be written (disk full, no
  permission); the message names the file and what is still intact."""


def os_reason(error: OSError) -> str:
  """Why ``error`` happened, as the system says it; a full disk says so in words."""
  reason = error.strerror or str(error)
  if error.errno in (errno.ENOSPC, errno.EDQUOT):
    reason += ': the disk is full'
  return reason


def shorten(text: str, limit: int) -> str:
  """``text``, its middle left out past ``limit`` characters, so that a message naming a
  huge value stays one readable line."""
  if len(text) <= limit:
    return text
  half = limit // 2
  return f'{text[:half]}...{text[-half:]} ({len(text):,} characters)'


_BRIEF = reprlib.Repr()  # Reprs of collections cut short (a nested list, a dict).
_BRIEF.maxlevel, _BRIEF.maxother = 2, 80


def shown(value) -> str:
  """The repr of ``value`` for a message: past 80 characters a string's middle is left
  out, and a collection's repr is cut short (never built whole)."""
  return shorten(repr(value) if isinstance(value, str) else _BRIEF.repr(value), 80)


def warn(message: str) -> None:
  """Prints ``tff-noisy: warning: <message>`` on stderr."""
  print(f'{PROG}: warning: {message}', file=sys.stderr)
