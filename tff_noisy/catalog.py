"""``tff-noisy list``: every choice a config can name, with its parameters and defaults.

Built from the registries that config validation uses (``registry.Registry``), so it
imports no TensorFlow: each section lists one registry's names, each with its entry's
listing line and the fields of its ``Params`` class. A parameter's default and
description are its field's (``params.described``), else those of the config field of
the same name in the registry's section (``noise.rate``: ``NoiseConfig.rate``).
"""

import dataclasses
import typing
from typing import Optional

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import registry
from tff_noisy import zoo
from tff_noisy.data import noise
from tff_noisy.data import partition
from tff_noisy.data import sources
from tff_noisy.embeddings.params import ENCODERS
from tff_noisy.errors import UserError
from tff_noisy.federated import aggregators
from tff_noisy.ops import faults
from tff_noisy.params import did_you_mean, help_of


@dataclasses.dataclass(frozen=True)
class Param:
  name: str
  default: object
  description: str = ''


@dataclasses.dataclass(frozen=True)
class Choice:
  name: str
  summary: str
  params: tuple = ()  # Param each.


@dataclasses.dataclass(frozen=True)
class Section:
  title: str  # The config field that names a choice, and where its parameters go.
  choices: tuple
  fields: tuple = ()  # Params that every choice reads (faults.*).


def field_helps(cls) -> dict:
  """Field name -> its help text (``params.described``), for dataclass ``cls``."""
  return {field.name: help_of(field) for field in dataclasses.fields(cls)}


def _default(field: dataclasses.Field):
  """The field's default (``dataclasses.MISSING`` if it has none)."""
  if field.default_factory is not dataclasses.MISSING:
    return field.default_factory()
  return field.default


def _params(cls, names: Optional[tuple] = None, config_section=None) -> tuple:
  """The fields of dataclass ``cls`` (those in ``names``, in that order) as Params; a
  field without a default or help takes those of dataclass ``config_section``'s field of
  its name."""
  fields = {f.name: f for f in dataclasses.fields(cls)}
  config_fields = ({f.name: f for f in dataclasses.fields(config_section)}
                   if config_section else {})
  params = []
  for name in (fields if names is None else names):
    field, default = fields[name], _default(fields[name])
    config_field = config_fields.get(name, field)
    params.append(Param(name, _default(config_field) if default is dataclasses.MISSING
                        else default, help_of(field) or help_of(config_field)))
  return tuple(params)


# Section -> the registry it lists, what its title adds to the registry's field, and the
# fields every choice reads.
SECTIONS = {
    'methods': (methods.METHODS, '; parameters under method.params', ()),
    'aggregators': (aggregators.AGGREGATORS, '; parameters under fl.aggregator_params', ()),
    'models': (zoo.MODELS, '; options under model', ()),
    'datasets': (sources.DATASETS, '', ()),
    'noise': (noise.NOISE_MODELS, '; fields under noise', ()),
    'partitions': (partition.PARTITIONS, '; fields under partition', ()),
    'faults': (faults.BEHAVIOURS, '; fields under faults', ('dropout', 'byzantine')),
    'runtimes': (config_lib.CLIENT_RUNTIMES, '', ()),
    'encoders': (ENCODERS, '; any other value is a TF-Hub handle or a SavedModel directory',
                 ()),
}


def _section(choices: registry.Registry, note: str, fields: tuple) -> Section:
  """The section of registry ``choices``: every name with its entry's listing and
  parameters, then ``fields`` of the config section the registry's field is in."""
  config_section = typing.get_type_hints(config_lib.ExperimentConfig)[
      choices.field.split('.')[0]]
  return Section(choices.field + note, tuple(
      Choice(name, entry.listing(),
             _params(entry.params, config_section=config_section) if entry.params else ())
      for name, entry in choices.items()), _params(config_section, fields))


CONFIG = 'config'  # ``tff-noisy list config``: every config field with its default.
REFERENCE = 'docs/configuration.md'  # ``tff-noisy list --markdown`` writes its text.


def section(name: str) -> Section:
  """Section ``name``; a UserError naming the sections for any other name."""
  if name not in SECTIONS:
    raise UserError(f"list: unknown section '{name}'{did_you_mean(name, [*SECTIONS, CONFIG])}"
                    f" Allowed: {', '.join([*SECTIONS, CONFIG])}")
  return _section(*SECTIONS[name])


def value_text(value) -> str:
  """A default as a config writes it (YAML)."""
  if value is None:
    return 'null'
  if isinstance(value, bool):
    return 'true' if value else 'false'
  if isinstance(value, (list, tuple)):
    return '[' + ', '.join(value_text(v) for v in value) + ']'
  if isinstance(value, dict):
    return '{' + ', '.join(f'{k}: {value_text(v)}' for k, v in value.items()) + '}'
  return str(value)


def _param_lines(params: tuple, indent: str) -> list:
  settings = [f'{p.name}: {value_text(p.default)}' for p in params]
  width = max(map(len, settings), default=0)
  return [f'{indent}{setting:<{width}}  # {p.description}' if p.description
          else f'{indent}{setting}' for setting, p in zip(settings, params)]


def config_defaults() -> str:
  """Every field of a config file with the value it takes when the file leaves it out,
  as YAML, each with its field's help from ``config.py`` (the configuration reference
  holds this text)."""
  defaults = config_lib.ExperimentConfig()
  top_helps = field_helps(config_lib.ExperimentConfig)
  lines = []
  for field in dataclasses.fields(defaults):
    value = getattr(defaults, field.name)
    if not dataclasses.is_dataclass(value):
      comment = top_helps.get(field.name)
      lines.append(f'{field.name}: {value_text(value)}' + (f'  # {comment}' if comment else ''))
      continue
    lines.append(f'{field.name}:')
    params = _params(type(value))
    lines += _param_lines(tuple(Param(p.name, getattr(value, p.name), p.description)
                                for p in params), '  ')
  return '\n'.join(lines)


def render(name: Optional[str] = None) -> str:
  """The listing of section ``name``, or of every section (``config``: the defaults)."""
  if name == CONFIG:
    return config_defaults()
  blocks = []
  for title in ([name] if name is not None else SECTIONS):
    part = section(title)
    width = max(len(c.name) for c in part.choices)
    lines = [f'{title} ({part.title})']
    for choice in part.choices:
      lines.append(f'  {choice.name:<{width}}  {choice.summary}')
      lines += _param_lines(choice.params, ' ' * (width + 4))
    if part.fields:
      lines.append('  fields:')
      lines += _param_lines(part.fields, '    ')
    blocks.append('\n'.join(lines))
  return '\n\n'.join(blocks)


def reference_markdown() -> str:
  """The configuration reference (``REFERENCE``): every field with its default, then every
  section's choices with their parameters; ``tests/test_catalog.py`` fails when the
  committed page differs."""
  parts = [
      '# Configuration reference\n',
      'Generated from the registries that validate a config by `tff-noisy list --markdown`; '
      'do not edit it by hand. After a change to a registry or a field, regenerate it: '
      f'`.venv/bin/tff-noisy list --markdown > {REFERENCE}` (a test fails until then).\n',
      '## Every field and its default\n',
      'A field a config file leaves out takes this value (`tff-noisy list config`).\n',
      f'```yaml\n{config_defaults()}\n```\n',
      '`imports` lists modules of your own, imported before the rest of the config is '
      'checked: each registers the methods (models, aggregators) it defines, which the '
      'config can then name ([how to add a method](architecture.md#how-to-add-a-method)). '
      "`--import MODULE` adds one to the config's list. A module that cannot be imported "
      'stops the command with one line naming the key and the module. The list is kept in '
      "`results.json` with the rest of the config, so `evaluate`, `export` and a study's "
      "runs in processes of their own import the same modules; `--resume` imports the "
      "config's list, which may differ from the checkpoint's (the method's name and "
      'parameters may not). Installed packages can declare such modules as entry points '
      'instead (group `tff_noisy.methods`), which need no `imports`.\n']
  for name in SECTIONS:
    parts.append(f'## {name}\n')
    parts.append(f'`tff-noisy list {name}`\n')
    parts.append(f'```\n{render(name)}\n```\n')
  return '\n'.join(parts)
