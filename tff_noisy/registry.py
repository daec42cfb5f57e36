"""The one shape of every choice a config can name: a ``Registry`` of ``Entry`` objects.

A registry maps a name to its entry and knows the config field that names it
(``method.name``, ``fl.aggregator``, ``model.name``, ...); ``lookup`` is the one place an
unknown name becomes a ``ConfigError`` and ``register`` the one place a name is added. An
entry holds what does not depend on its name: a one-line ``summary``, its typed
``params`` and its ``target``, what the name builds. ``tff-noisy list`` reads every
registry through this shape (``catalog``). A registry may ``discover`` more entries the
first time it is used (the methods' entry points, ``extensions``).
TensorFlow-free: a target named by string is imported only when it is resolved.
"""

import collections.abc
import dataclasses
import importlib
from typing import Callable, Optional

from tff_noisy.errors import ConfigError, shorten
from tff_noisy.params import did_you_mean


@dataclasses.dataclass(frozen=True)
class Entry:
  """What a name stands for; the specific entries (``MethodSpec``, ``DatasetSpec``)
  extend it with what their own code reads."""
  summary: str  # One line: what it is.
  # Its frozen ``params.Params`` dataclass: the parameters a config gives it, with their
  # types, defaults and checks (a class without fields if it takes none); None where a
  # config gives it no parameters of its own.
  params: Optional[type] = None
  # What the name builds: 'module:attribute', imported when resolved (TensorFlow may come
  # with it), or the object itself (registered from Python); None where the code that
  # reads the name builds it.
  target: object = None

  def resolve(self):
    """The target, its module imported if it is named by string."""
    if not isinstance(self.target, str):
      return self.target
    module, _, attribute = self.target.partition(':')
    return getattr(importlib.import_module(module), attribute)

  def listing(self) -> str:
    """The line ``tff-noisy list`` shows beside its name."""
    return self.summary


class Registry(collections.abc.Mapping):
  """Name -> ``entry_type`` entry, in the order ``tff-noisy list`` shows them, of the
  choices config field ``field`` names (a ``kind`` each: 'method', 'model', ...).
  ``discover()``, if given, runs once when the registry is first used and may register
  more entries; if it raises, it runs again at the next use. ``unknown_hint`` ends the
  error for an unknown name (where names of one's own come from)."""

  def __init__(self, field: str, kind: str, entries: dict, entry_type: type = Entry,
               discover: Optional[Callable[[], None]] = None, unknown_hint: str = ''):
    self.field = field
    self.kind = kind
    self.entry_type = entry_type
    self.unknown_hint = unknown_hint
    self._entries = {}
    self._discover = None
    for name, entry in entries.items():
      self.register(name, entry)
    self._discover = discover

  def _found(self) -> dict:
    """The entries, after ``discover`` has run."""
    discover, self._discover = self._discover, None
    if discover is not None:
      try:
        discover()
      except BaseException:
        self._discover = discover
        raise
    return self._entries

  def __getitem__(self, name: str) -> Entry:
    return self._found()[name]

  def __iter__(self):
    return iter(self._found())

  def __len__(self) -> int:
    return len(self._found())

  def lookup(self, name: str) -> Entry:
    """The entry of ``name``; a ConfigError naming the field, the closest name and every
    name for any other."""
    entries = self._found()
    if name not in entries:
      raise ConfigError(f"{self.field}: unknown {self.kind} '{shorten(str(name), 80)}'"
                        f"{did_you_mean(name, entries)} Allowed: {', '.join(self)}"
                        + (f' ({self.unknown_hint})' if self.unknown_hint else ''))
    return entries[name]

  def register(self, name: str, entry: Entry) -> None:
    """Adds ``entry`` as ``name``; a TypeError or ValueError naming the argument for a
    name that is no string or is taken, or an entry of another type."""
    self._found()
    if not isinstance(name, str) or not name:
      raise TypeError(f'name: expected a non-empty string, got {name!r}')
    if name in self._entries:
      raise ValueError(f"name: {self.kind} '{name}' is registered already")
    if not isinstance(entry, self.entry_type):
      raise TypeError(f"entry: {self.kind} '{name}' needs a {self.entry_type.__name__}, got "
                      f'{type(entry).__name__}')
    self._entries[name] = entry

  def copy(self) -> 'Registry':
    """A registry of the same field and entries that registers apart from this one."""
    return Registry(self.field, self.kind, self._found(), self.entry_type,
                    unknown_hint=self.unknown_hint)
