"""YAML as people write it: numbers as YAML 1.2 reads them, errors in one line.

PyYAML follows YAML 1.1, which reads ``1e-3``, ``1E6`` and ``+1e3`` as strings (its
floats need a dot and a signed exponent), ``017`` as the octal 15 and ``1:00`` as the
base-60 number 60. :func:`load` reads them as YAML 1.2 does: the exponent forms as
floats, a leading zero as decimal (``017`` is 17) and ``1:00`` as a string (so a field
that wants a number refuses it by name). ``0x1f``, ``0b101`` and ``1_000`` stay numbers.
"""

import re
from typing import Any

import yaml

from tff_noisy.errors import shorten

_INT = 'tag:yaml.org,2002:int'
_FLOAT = 'tag:yaml.org,2002:float'


class YamlError(ValueError):
  """Text that is not YAML; the message is PyYAML's, with its line and column, in one line."""


class _Loader(yaml.SafeLoader):
  """``SafeLoader`` with YAML 1.2's numbers (see the module docstring)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    _INT, re.compile(r'^[-+]?(?:0b[01_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*)$'),
    list('-+0123456789'))
_Loader.add_implicit_resolver(
    _FLOAT, re.compile(r'''^(?:[-+]?(?:
        (?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+  # 1e-3, 1.5E+2, .5e3
        |[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*  # 1.5, 1., .5
        |\.(?:inf|Inf|INF))
      |\.(?:nan|NaN|NAN))$''', re.X),
    list('-+0123456789.'))


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
  """An integer in base 10 (leading zeros too), or after ``0x`` / ``0b`` in base 16 / 2."""
  text = loader.construct_scalar(node).replace('_', '')
  digits = text.lstrip('+-')
  base = {'0x': 16, '0b': 2}.get(digits[:2], 10)
  try:
    value = int(digits[2:] if base != 10 else digits, base)
  except ValueError:  # An explicit !!int tag on text that is not one.
    raise yaml.constructor.ConstructorError(
        None, None, f'{shorten(repr(text), 80)} is not an integer', node.start_mark) from None
  return -value if text.startswith('-') else value


_Loader.add_constructor(_INT, _construct_int)


# A config's limits: its text, and its values once each alias (*name) stands for the
# values of its anchor (&name), so that a short document cannot expand to gigabytes. The
# longest shipped protocol holds 69,030 characters and 2,862 values.
MAX_CHARS = 1 << 20
MAX_VALUES = 100_000


def load(stream) -> Any:
  """Parses a YAML string or text file safely; raises YamlError ('invalid YAML: ...', or
  which limit the text passes)."""
  text = stream if isinstance(stream, str) else stream.read(MAX_CHARS + 1)
  if len(text) > MAX_CHARS:
    raise YamlError(f'more than {MAX_CHARS:,} characters, the most a config may hold')
  loader = _Loader(text)
  try:
    node = loader.get_single_node()
    if node is None:
      return None
    _count_values(node, {}, set())
    return loader.construct_document(node)
  except yaml.YAMLError as e:
    raise YamlError(f'invalid YAML: {_one_line(e)}') from None
  except RecursionError:
    raise YamlError('invalid YAML: nested deeper than Python can read') from None
  finally:
    loader.dispose()


def _count_values(node: yaml.Node, counts: dict, holding: set) -> int:
  """How many values ``node`` holds with every alias expanded; a YamlError past
  MAX_VALUES or for an alias inside the collection it names."""
  if id(node) in holding:
    raise YamlError(f'an alias refers to the collection that holds it '
                    f'(line {node.start_mark.line + 1}); write the values out')
  if id(node) not in counts:
    children = node.value if isinstance(node, yaml.SequenceNode) else (
        [child for pair in node.value for child in pair]
        if isinstance(node, yaml.MappingNode) else [])
    holding.add(id(node))
    counts[id(node)] = 1 + sum(_count_values(child, counts, holding) for child in children)
    holding.discard(id(node))
    if counts[id(node)] > MAX_VALUES:
      raise YamlError(f'more than {MAX_VALUES:,} values once its aliases (*name) are '
                      'expanded, the most a config may hold; write the values out or use '
                      'fewer aliases')
  return counts[id(node)]


def _one_line(error: yaml.YAMLError) -> str:
  """'while parsing ...: expected ... (line 3, column 8)' from a PyYAML error."""
  if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
    mark = error.problem_mark
    context = f'{error.context}: ' if error.context else ''
    return shorten(f'{context}{error.problem}', 200) + (
        f' (line {mark.line + 1}, column {mark.column + 1})')
  return shorten(' '.join(str(error).split()), 200)
