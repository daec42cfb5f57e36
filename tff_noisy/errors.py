"""What the command line reports to a person: one-line errors and warnings, no traceback.

Importable from anywhere without an import cycle (it imports nothing of the project).
"""

import errno
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


def warn(message: str) -> None:
  """Prints ``tff-noisy: warning: <message>`` on stderr."""
  print(f'{PROG}: warning: {message}', file=sys.stderr)
