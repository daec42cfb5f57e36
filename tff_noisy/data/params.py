"""Typed parameters of the noise models and partitions: what their checks share.

A config holds one flat ``noise`` and one flat ``partition`` section (``config.py``: the
YAML schema, the defaults, each field's help and the data's cache key). Each noise model
and partition has its own ``Params`` class beside its builder (``noise.NOISE_MODELS``,
``partition.PARTITIONS``) naming the fields it reads and checking them (ranges, choices,
what the dataset allows). ``resolve`` builds that class from the flat section and refuses
a field the model does not read but the config sets (``noise.rate`` with ``noise.name:
fedln`` would be ignored otherwise). TensorFlow-free: checked before any work starts.
"""

import dataclasses

from tff_noisy.params import fail, Params


@dataclasses.dataclass(frozen=True)
class Context:
  """What the checks depend on: the dataset and what is known about it."""
  dataset: str
  num_classes: int
  noisy_label_columns: tuple  # Its human noisy-label columns (CIFAR-N), if any.
  noisy_label_datasets: tuple  # The datasets that have such columns.


def in_unit(params: Params, *names: str) -> None:
  for name in names:
    value = getattr(params, name)
    if not 0.0 <= value <= 1.0:
      fail(name, f'must be in [0, 1], got {value}', params.prefix)


def at_least(params: Params, name: str, low) -> None:
  value = getattr(params, name)
  if value < low:
    fail(name, f'must be >= {low}, got {value}', params.prefix)


def needs_ten_classes(params: Params, field: str, context: Context) -> None:
  if context.num_classes != 10:
    fail(field, f'cifar10_asym needs a 10-class dataset; {context.dataset} has '
                f'{context.num_classes} classes', params.prefix)


def one_of(params: Params, name: str, allowed) -> None:
  value = getattr(params, name)
  if value not in allowed:
    fail(name, f"must be one of {', '.join(allowed)}; got {value!r}", params.prefix)


def field_names(cls) -> tuple:
  """The config fields that parameter class ``cls`` reads."""
  return tuple(f.name for f in dataclasses.fields(cls))


def resolve(cls, section, context: Context) -> Params:
  """``cls`` from the flat config ``section`` (a ``NoiseConfig`` or ``PartitionConfig``),
  checked; a ConfigError for a field ``cls`` does not read that ``section`` sets away
  from its default (it would be ignored), unless ``cls.ignores_other_fields``."""
  reads = field_names(cls)
  for field in dataclasses.fields(section):
    value = getattr(section, field.name)
    if (field.name in reads or field.name == 'name' or value == field.default
        or getattr(cls, 'ignores_other_fields', False)):
      continue
    fail(field.name, f"{section.name!r} does not read it (it reads "
                     f"{', '.join(reads) or 'no field'}); remove it or set it back to "
                     f"its default ({field.default!r}), or choose a {cls.prefix[:-1]} "
                     'that reads it', cls.prefix)
  params = cls(**{name: getattr(section, name) for name in reads})
  params.validate(context)
  return params

