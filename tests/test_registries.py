"""Every choice a config can name has one shape: a ``registry.Registry`` of
``registry.Entry`` objects, each with a one-line summary, a frozen ``Params`` class or
None, and a target that resolves; an unknown name and a second registration are one-line
errors."""
import dataclasses

import pytest

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import registry
from tff_noisy import zoo
from tff_noisy.data import noise
from tff_noisy.data import partition
from tff_noisy.data import sources
from tff_noisy.embeddings.params import ENCODERS
from tff_noisy.errors import ConfigError
from tff_noisy.federated import aggregators
from tff_noisy.ops import faults
from tff_noisy.params import Params

_REGISTRIES = {
    'method.name': methods.METHODS,
    'fl.aggregator': aggregators.AGGREGATORS,
    'model.name': zoo.MODELS,
    'data.dataset': sources.DATASETS,
    'noise.name': noise.NOISE_MODELS,
    'partition.name': partition.PARTITIONS,
    'faults.behaviour': faults.BEHAVIOURS,
    'fl.client_runtime': config_lib.CLIENT_RUNTIMES,
    'method.params.encoder': ENCODERS,
}
_ENTRIES = [(field, name) for field, choices in _REGISTRIES.items() for name in choices]


@pytest.mark.parametrize('field', list(_REGISTRIES))
def test_every_registry_is_one_and_knows_its_field(field):
  choices = _REGISTRIES[field]
  assert isinstance(choices, registry.Registry)
  assert choices.field == field and choices.kind and len(choices) >= 2


@pytest.mark.parametrize('field, name', _ENTRIES)
def test_every_entry_has_the_one_shape(field, name):
  entry = _REGISTRIES[field][name]
  assert isinstance(entry, registry.Entry)
  for line in (entry.summary, entry.listing()):
    assert line.strip() and '\n' not in line
  if entry.params is not None:
    assert issubclass(entry.params, Params) and dataclasses.is_dataclass(entry.params)
    assert entry.params.__dataclass_params__.frozen
  target = entry.resolve()
  assert target is entry.target if not isinstance(entry.target, str) else callable(target)


def test_the_datasets_give_their_classes_and_input_shape():
  for name, spec in sources.DATASETS.items():
    assert spec.num_classes >= 2 and spec.input_shape, name


@pytest.mark.parametrize('field', list(_REGISTRIES))
def test_an_unknown_name_is_one_line_naming_the_field_and_every_name(field):
  choices = _REGISTRIES[field]
  first = next(iter(choices))
  with pytest.raises(ConfigError) as error:
    choices.lookup(first + 'x')
  message = str(error.value)
  hint = f' ({choices.unknown_hint})' if choices.unknown_hint else ''  # Methods': imports.
  assert message == (f"{field}: unknown {choices.kind} '{first}x'; did you mean "
                     f"'{first}'? Allowed: {', '.join(choices)}{hint}")
  with pytest.raises(ConfigError, match=f"^{field}: unknown {choices.kind} 'zzzzzz' Allowed: "):
    choices.lookup('zzzzzz')
  assert choices.lookup(first) is choices[first]


def test_register_refuses_a_taken_name_another_entry_type_and_a_bad_name():
  choices = methods.METHODS.copy()
  spec = methods.MethodSpec('a test method', Params, object)
  choices.register('test_method', spec)
  assert choices['test_method'] is spec and 'test_method' not in methods.METHODS
  with pytest.raises(ValueError, match="^name: method 'test_method' is registered already$"):
    choices.register('test_method', spec)
  with pytest.raises(TypeError, match="^entry: method 'other' needs a MethodSpec, got Entry$"):
    choices.register('other', registry.Entry('not a method spec'))
  with pytest.raises(TypeError, match='^name: expected a non-empty string, got 3$'):
    choices.register(3, spec)


def test_a_registered_models_options_are_checked_as_the_zoos(monkeypatch):
  monkeypatch.setattr(zoo, 'MODELS', zoo.MODELS.copy())  # Undone after the test.
  zoo.register('wide', lambda input_shape, num_classes, width, norm: None,
               options={'width': 64, 'norm': 'group'})
  assert zoo.resolve_options('wide', {}) == {'width': 64, 'norm': 'group'}
  assert zoo.resolve_options('wide', {'width': 8}) == {'width': 8, 'norm': 'group'}
  with pytest.raises(ConfigError, match='^model.width: needs an integer >= 1, got 0$'):
    zoo.resolve_options('wide', {'width': 0})
  with pytest.raises(ConfigError, match="^model.norm: needs 'group' or 'batch', got 'layer'$"):
    zoo.resolve_options('wide', {'norm': 'layer'})
  zoo.register('plain', lambda input_shape, num_classes: None)
  with pytest.raises(ConfigError, match="^model.width: not a parameter of 'plain' Allowed: "
                                        'none$'):
    zoo.resolve_options('plain', {'width': 8})
