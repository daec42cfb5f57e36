"""Typed parameter groups: frozen dataclasses whose values are checked from their
annotations, then by each class's own ``check`` (ranges and choices).

A method's parameters (``methods/<name>/``) and the encoder group (``embeddings.params``)
derive from ``Params``; ``require`` raises the :class:`ConfigError` that names the field
(``method.params.k``) and what it allows. TensorFlow-free, so a config is checked before
anything heavy is imported.
"""

import dataclasses
import typing

from tff_noisy.errors import ConfigError

FIELD = 'method.params.'


def is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def require(condition: bool, name: str, message: str, value) -> None:
  """Raises ``ConfigError('method.params.NAME: needs MESSAGE, got VALUE')`` unless
  ``condition``."""
  if not condition:
    raise ConfigError(f'{FIELD}{name}: needs {message}, got {value!r}')


_TYPE_CHECKS = {int: (is_integer, 'an integer'), float: (is_number, 'a number'),
                bool: (lambda v: isinstance(v, bool), 'true or false'),
                str: (lambda v: isinstance(v, str) and bool(v), 'a non-empty string'),
                list: (lambda v: isinstance(v, (list, tuple)), 'a list')}


@dataclasses.dataclass(frozen=True)
class Params:
  """Parameters of a method that has none (FedAvg); the base of every parameter class.

  ``validate`` checks every value's type from the annotations, then ``check``: each
  class checks its own values' ranges and calls ``super().check`` (so a method that
  combines groups checks them all, its own first).
  """

  def validate(self, rounds: int) -> None:
    """Raises ConfigError unless every value is allowed; ``rounds`` is fl.rounds."""
    self._check_types()
    self.check(rounds)

  def check(self, rounds: int) -> None:
    del rounds

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
      require(test(value), field.name, what, value)
