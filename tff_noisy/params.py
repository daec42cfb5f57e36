"""Typed parameter groups: frozen dataclasses built from a config mapping, whose values
are checked from their annotations, then by each class's own ``check`` (ranges, choices).

A method's parameters (``methods/<name>/``), the encoder group (``embeddings.params``)
and each aggregator's (``federated.aggregators.params``) derive from ``Params``;
``from_mapping`` refuses unknown names with a "did you mean", ``require`` raises the
:class:`ConfigError` that names the field (``method.params.k``) and what it allows.
A field's help is its metadata (``described``).
TensorFlow-free, so a config is checked before anything heavy is imported.
"""

import dataclasses
import difflib
import typing
import unicodedata
from typing import ClassVar

from tff_noisy.errors import ConfigError, shorten, shown

FIELD = 'method.params.'


def is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def described(default=dataclasses.MISSING, text: str = '', *,
              default_factory=dataclasses.MISSING) -> dataclasses.Field:
  """A dataclass field with its one-line help ``text`` in its metadata (``tff-noisy
  list`` and the configuration reference show it)."""
  return dataclasses.field(default=default, default_factory=default_factory,
                           metadata={'help': text})


def help_of(field: dataclasses.Field) -> str:
  """A field's help text (``described``), or ''."""
  return field.metadata.get('help', '')


def did_you_mean(value, choices, cutoff: float = 0.6) -> str:
  """"; did you mean 'X'?" for the choice closest to ``value``, or '' if none is close;
  case and full-width forms do not count (``FEDAVG``, ``ｆｅｄａｖｇ``: fedavg)."""
  word, choices = _folded(value), [str(choice) for choice in choices]
  folded = {_folded(choice): choice for choice in reversed(choices)}
  if word in folded:
    return f"; did you mean '{folded[word]}'?"
  # difflib's ratio is at most 2c / (len(word) + c) for a choice of c characters: a word
  # far longer than every choice is close to none (and difflib is slow on it).
  if cutoff * len(word) > (2 - cutoff) * max(map(len, folded), default=0):
    return ''
  close = difflib.get_close_matches(word, list(folded), n=1, cutoff=cutoff)
  return f"; did you mean '{folded[close[0]]}'?" if close else ''


def _folded(text) -> str:
  """``text`` without case and compatibility forms (full-width letters, ligatures)."""
  return unicodedata.normalize('NFKC', str(text)).casefold()


def fail(name: str, message: str, prefix: str = FIELD):
  """Raises ``ConfigError('PREFIX NAME: MESSAGE')``."""
  raise ConfigError(f'{prefix}{name}: {message}')


def require(condition: bool, name: str, message: str, value, prefix: str = FIELD) -> None:
  """Raises ``ConfigError('method.params.NAME: needs MESSAGE, got VALUE')`` unless
  ``condition`` (another field ``prefix`` than method.params.)."""
  if not condition:
    fail(name, f'needs {message}, got {shown(value)}', prefix)


_TYPE_CHECKS = {int: (is_integer, 'an integer'), float: (is_number, 'a number'),
                bool: (lambda v: isinstance(v, bool), 'true or false'),
                str: (lambda v: isinstance(v, str) and bool(v), 'a non-empty string'),
                list: (lambda v: isinstance(v, (list, tuple)), 'a list')}


@dataclasses.dataclass(frozen=True)
class Params:
  """Parameters of a method that has none (FedAvg); the base of every parameter class.

  ``validate`` checks every value's type from the annotations, then ``check``: each
  class checks its own values' ranges and calls ``super().check`` (so a method that
  combines groups checks them all, its own first). ``check``'s argument is what the
  limits depend on: fl.rounds for a method, the clients per round for an aggregator.
  """

  prefix: ClassVar[str] = FIELD  # Where its fields sit in a config.
  # Fields added after runs were recorded without them, each with the value its absence
  # means (a run recorded before it existed ran as if it had that value).
  added_fields: ClassVar[dict] = {}

  @classmethod
  def from_mapping(cls, values: dict, context, owner: str, belongs=None) -> 'Params':
    """``cls`` from a config mapping, defaults filled in and validated against
    ``context``; ConfigError for a name it does not take (``owner``: whose parameters
    they are; ``belongs(key)``: where a misplaced key belongs, for the message)."""
    if not isinstance(values, dict):
      raise ConfigError(f'{cls.prefix[:-1]}: expected a mapping, got {shown(values)}')
    allowed = [f.name for f in dataclasses.fields(cls)]
    for key in values:
      if key not in allowed:
        where = belongs(key) if belongs else ''
        fail(shorten(str(key), 80), f"not a parameter of '{owner}'{where}"
             f"{did_you_mean(key, allowed, 0.5)} Allowed: {', '.join(allowed) or 'none'}",
             cls.prefix)
    resolved = cls(**values)
    resolved.validate(context)
    return resolved

  def validate(self, context) -> None:
    """Raises ConfigError unless every value is allowed (see ``check``)."""
    self._check_types()
    self.check(context)

  def check(self, context) -> None:
    del context

  def as_dict(self) -> dict:
    """The values, a ``float`` field's whole numbers as floats (what a builder takes)."""
    hints = typing.get_type_hints(type(self))
    return {f.name: float(getattr(self, f.name))
            if hints[f.name] is float else getattr(self, f.name)
            for f in dataclasses.fields(self)}

  @classmethod
  def identifying(cls, values: dict) -> dict:
    """``values`` (a record of this class's fields) without the ``added_fields`` at the
    value their absence means: what tells two runs apart, so a run recorded before a
    field was added matches one that leaves it at that value."""
    return {name: value for name, value in values.items()
            if not (name in cls.added_fields and value == cls.added_fields[name])}

  def _check_types(self) -> None:
    hints = typing.get_type_hints(type(self))
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      annotation = hints[field.name]
      if typing.get_origin(annotation) is typing.Union:
        if value is None:
          continue
        annotation = typing.get_args(annotation)[0]
      test, what = _TYPE_CHECKS[annotation]
      require(test(value), field.name, what, value, self.prefix)
