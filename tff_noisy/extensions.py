"""Methods (and models, aggregators) of the user's own package, for configs and the
command line: the modules a config's ``imports`` or ``tff-noisy --import`` names, and the
installed packages' entry points of group ``tff_noisy.methods``.

Each module registers its names when imported (``tff_noisy.register_method``,
``register_model``); importing it again does nothing (Python keeps it). The methods
registry imports every entry point's module the first time it is used
(``methods.METHODS``). TensorFlow-free; a module imported may load it.
"""

import importlib
import importlib.metadata
import re
import traceback

from tff_noisy.errors import ConfigError, UserError

ENTRY_POINTS = 'tff_noisy.methods'  # The entry point group of packages with methods.
IMPORTS_HINT = ('a method of your own package: name the module that registers it in the '
                "config's imports, or --import MODULE")
_MODULE_NAME = re.compile(r'[A-Za-z_]\w*(\.[A-Za-z_]\w*)*')


def check_names(names: list, field: str = 'imports') -> None:
  """A ConfigError naming ``field`` unless every item is a dotted module name."""
  for name in names:
    if not isinstance(name, str) or not _MODULE_NAME.fullmatch(name):
      raise ConfigError(f'{field}: expected module names such as my_pkg.methods, got '
                        f'{name!r}')


def import_modules(names: list, field: str = 'imports') -> None:
  """Imports each of ``names`` in order; one that cannot be imported is a ConfigError
  naming ``field``, the module and why (the error its import raised, in one line)."""
  check_names(names, field)
  for name in names:
    try:
      importlib.import_module(name)
    except Exception as e:  # pylint: disable=broad-except (any error of the user's code)
      raise ConfigError(f"{field}: cannot import module '{name}': {_why(e)}") from e


def import_entry_points(group: str = ENTRY_POINTS) -> None:
  """Imports the module each installed entry point of ``group`` names (``name =
  module``); one that cannot be imported is a UserError naming the entry point and the
  package that declares it."""
  for entry in importlib.metadata.entry_points(group=group):
    try:
      importlib.import_module(entry.module)
    except Exception as e:  # pylint: disable=broad-except (any error of the package's code)
      package = f', package {entry.dist.name} {entry.dist.version}' if entry.dist else ''
      raise UserError(f"entry point '{entry.name} = {entry.value}' ({group}{package}): "
                      f"cannot import module '{entry.module}': {_why(e)}") from e


def _why(error: Exception) -> str:
  """An import's error in one line: a missing module's message; any other error's type
  and message, and where it was raised."""
  message = ' '.join(str(error).split())
  if isinstance(error, (ModuleNotFoundError, SyntaxError)):
    return message
  frame = traceback.extract_tb(error.__traceback__)[-1]
  return f'{type(error).__name__}: {message} ({frame.filename}, line {frame.lineno})'
