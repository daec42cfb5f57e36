"""YAML as people write it: numbers in every exponent form, errors in one line.

PyYAML follows YAML 1.1, which reads ``1e-3``, ``1E6`` and ``+1e3`` as strings (its
floats need a dot and a signed exponent). :func:`load` reads them as YAML 1.2 does:
as floats.
"""

import re
from typing import Any

import yaml


class YamlError(ValueError):
  """Text that is not YAML; the message is PyYAML's, with its line and column, in one line."""


class _Loader(yaml.SafeLoader):
  """``SafeLoader`` that also resolves exponent forms without a dot to floats."""


_Loader.add_implicit_resolver(
    'tag:yaml.org,2002:float',
    re.compile(r'^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$'),
    list('-+0123456789.'))


def load(stream) -> Any:
  """Parses a YAML string or text file safely; raises YamlError."""
  try:
    return yaml.load(stream, Loader=_Loader)  # nosec: a SafeLoader.
  except yaml.YAMLError as e:
    raise YamlError(_one_line(e)) from None


def _one_line(error: yaml.YAMLError) -> str:
  """'while parsing ...: expected ... (line 3, column 8)' from a PyYAML error."""
  if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
    mark = error.problem_mark
    context = f'{error.context}: ' if error.context else ''
    return f'{context}{error.problem} (line {mark.line + 1}, column {mark.column + 1})'
  return ' '.join(str(error).split())
