"""The TensorFlow-free model registry (`tff_noisy.zoo`) against the model zoo it describes."""
import dataclasses
import inspect

import pytest

import models
from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy import zoo


def test_names_are_the_zoos():
  assert tuple(zoo.MODELS) == models.MODEL_NAMES


@pytest.mark.parametrize('name', models.MODEL_NAMES)
def test_builders_take_exactly_the_entrys_options_without_defaults(name):
  build = zoo.MODELS[name].resolve()
  assert build is models._MODULES[name].build  # pylint: disable=protected-access
  options = {p.name: p.default for p in inspect.signature(build).parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY}
  assert options == dict.fromkeys(
      [f.name for f in dataclasses.fields(zoo.MODELS[name].params)], inspect.Parameter.empty)


@pytest.mark.parametrize('model, message', [
    ({'name': 'alexnet'}, "model.name: unknown model 'alexnet' Allowed: mlp, small_cnn"),
    ({'name': 'resnet_20'}, "model.name: unknown model 'resnet_20'; did you mean 'resnet20'? Allowed: "),
    ({'name': 'small_cnn', 'width': 64},
     "model.width: not a parameter of 'small_cnn' Allowed: none"),
    ({'name': 'mlp', 'norm': 'group'}, "model.norm: not a parameter of 'mlp' Allowed: width"),
    ({'name': 'mlp', 'width': 0}, 'model.width: needs an integer >= 1, got 0'),
    ({'name': 'resnet20', 'norm': 'layer'},
     "model.norm: needs 'group' or 'batch', got 'layer'"),
])
def test_config_validation_checks_the_model_before_tensorflow_is_needed(model, message):
  config = config_lib.from_dict({'model': model})
  with pytest.raises(config_lib.ConfigError) as error:
    validation.validate_experiment(config)
  assert str(error.value).startswith(message)
