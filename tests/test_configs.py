"""Every shipped experiment config loads and validates, with its method's parameters."""
import glob
import os

import pytest

import dataclasses

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import validation

_CONFIGS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), '..', 'experiments',
                                         'configs', '*.yaml')))


def test_configs_are_found():
  assert len(_CONFIGS) >= 5


@pytest.mark.parametrize('path', _CONFIGS, ids=os.path.basename)
def test_shipped_config_is_valid(path):
  config = config_lib.load(path)
  params = validation.validate_experiment(config).method_params
  assert isinstance(params, methods.METHODS[config.method.name].params)
  assert set(dataclasses.asdict(params)) == set(methods.param_names(config.method.name))
