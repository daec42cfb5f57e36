"""``tff-noisy list``: every choice a config can name, with its parameters and defaults.

Built from the registries that config validation uses, so it imports no TensorFlow:
``methods.METHODS`` and their ``Params`` dataclasses, the aggregators, the model zoo's
table (``zoo``), ``sources.DATASETS``, ``noise.NOISE_MODELS``,
``partition.PARTITIONS`` and the simulated faults' ``ops.faults.BEHAVIOURS``. A
parameter's description is its field's help (``params.described``).
"""

import dataclasses
from typing import Optional

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import zoo
from tff_noisy.data import noise
from tff_noisy.data import params as data_params
from tff_noisy.data import partition
from tff_noisy.data import sources
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
  if field.default_factory is not dataclasses.MISSING:
    return field.default_factory()
  return field.default


def _params(cls, names: Optional[tuple] = None) -> tuple:
  """The fields of dataclass ``cls`` (those in ``names``, in that order) as Params."""
  fields = {f.name: f for f in dataclasses.fields(cls)}
  return tuple(Param(name, _default(fields[name]), help_of(fields[name]))
               for name in (fields if names is None else names))


def _methods() -> Section:
  choices = []
  for name, spec in methods.METHODS.items():
    public = ' (needs data.public_fraction > 0)' if spec.needs_public_split else ''
    choices.append(Choice(name, spec.summary + public, _params(spec.params)))
  return Section('method.name; parameters under method.params', tuple(choices))


def _aggregators() -> Section:
  return Section('fl.aggregator; parameters under fl.aggregator_params', tuple(
      Choice(name, spec.summary, _params(spec.params))
      for name, spec in aggregators.AGGREGATORS.items()))


def _models() -> Section:
  helps = field_helps(config_lib.ModelConfig)
  return Section('model.name; options under model', tuple(
      Choice(name, spec.summary, tuple(Param(p.name, p.default, helps.get(p.name, ''))
                                       for p in _params(spec.params)))
      for name, spec in zoo.MODELS.items()))


def _datasets() -> Section:
  return Section('data.dataset', tuple(Choice(name, spec.listing())
                                       for name, spec in sources.DATASETS.items()))


def _noise() -> Section:
  return Section('noise.name; fields under noise', tuple(
      Choice(name, model.summary, _params(config_lib.NoiseConfig,
                                          data_params.field_names(model.params)))
      for name, model in noise.NOISE_MODELS.items()))


def _partitions() -> Section:
  return Section('partition.name; fields under partition', tuple(
      Choice(name, split.summary, _params(config_lib.PartitionConfig,
                                          data_params.field_names(split.params)))
      for name, split in partition.PARTITIONS.items()))


def _faults() -> Section:
  choices = tuple(Choice(name, entry.summary, _params(
      config_lib.FaultsConfig, data_params.field_names(entry.params) if entry.params else ()))
                  for name, entry in faults.BEHAVIOURS.items())
  return Section('faults.behaviour; fields under faults', choices,
                 _params(config_lib.FaultsConfig, ('dropout', 'byzantine')))


SECTIONS = {
    'methods': _methods,
    'aggregators': _aggregators,
    'models': _models,
    'datasets': _datasets,
    'noise': _noise,
    'partitions': _partitions,
    'faults': _faults,
}
CONFIG = 'config'  # ``tff-noisy list config``: every config field with its default.
REFERENCE = 'docs/configuration.md'  # ``tff-noisy list --markdown`` writes its text.


def section(name: str) -> Section:
  """Section ``name``; a UserError naming the sections for any other name."""
  if name not in SECTIONS:
    raise UserError(f"list: unknown section '{name}'{did_you_mean(name, [*SECTIONS, CONFIG])}"
                    f" Allowed: {', '.join([*SECTIONS, CONFIG])}")
  return SECTIONS[name]()


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
      f'```yaml\n{config_defaults()}\n```\n']
  for name in SECTIONS:
    parts.append(f'## {name}\n')
    parts.append(f'`tff-noisy list {name}`\n')
    parts.append(f'```\n{render(name)}\n```\n')
  return '\n'.join(parts)
