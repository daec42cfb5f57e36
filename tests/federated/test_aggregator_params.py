"""Aggregator choice and parameters: checked with clear messages, without TensorFlow."""
import subprocess
import sys

import pytest

from tff_noisy.config import ConfigError
from tff_noisy.federated import aggregators


def test_registry_imports_no_tensorflow():
  code = ('import sys; import tff_noisy.federated.aggregators as a; '
          'a.resolve_params("krum", {}, 10); '
          'assert not {"tensorflow", "tensorflow_federated"} & set(sys.modules)')
  subprocess.run([sys.executable, '-c', code], check=True)


def test_defaults_are_filled_in():
  assert aggregators.resolve_params('mean', {}, 10) == {}
  assert aggregators.resolve_params('geometric_median', {'max_iter': 4}, 10) == {
      'max_iter': 4, 'eps': 1e-5, 'smoothing': 1e-6}
  assert aggregators.resolve_params('trimmed_mean', {'beta': 0}, 10) == {'beta': 0.0}
  assert aggregators.resolve_params('geometric_median', {'eps': 0}, 10)['eps'] == 0.0
  assert aggregators.resolve_params('multi_krum', {}, 10) == {'f': 1, 'm': 2}
  assert set(aggregators.AGGREGATORS) == {
      'mean', 'geometric_median', 'geometric_median_per_tensor', 'coordinate_median',
      'trimmed_mean', 'krum', 'multi_krum'}


@pytest.mark.parametrize('name, params, n, message', [
    ('geometric_mediam', {}, 10,
     r"^fl.aggregator: unknown aggregator 'geometric_mediam'; did you mean "
     r"'geometric_median'\? Allowed: mean, geometric_median, "),
    ('krum', {'xyz': 1}, 10,
     r"^fl.aggregator_params.xyz: not a parameter of 'krum' Allowed: f$"),
    ('trimmed_mean', {'betta': 0.2}, 10,
     r"^fl.aggregator_params.betta: not a parameter of 'trimmed_mean'; did you mean 'beta'\?"),
    ('mean', {'beta': 0.2}, 10, r"not a parameter of 'mean' Allowed: none"),
    ('trimmed_mean', {'beta': 0.5}, 10,
     r'^fl.aggregator_params.beta: needs a number in \[0, 0.5\), got 0.5'),
    ('trimmed_mean', {'beta': '0.1'}, 10, r'fl.aggregator_params.beta: needs a number'),
    ('krum', {'f': 2}, 4,
     r'^fl.aggregator_params.f: Krum needs n - f - 2 >= 1 with n = fl.clients_per_round = 4: '
     r'f=2 needs n >= 5; with n=4, f can be at most 1'),
    ('krum', {}, 2, r'f=1 needs n >= 4; Krum needs n >= 3'),
    ('krum', {'f': 1.0}, 10, r'fl.aggregator_params.f: needs an integer, got 1.0'),
    ('multi_krum', {'m': 10}, 10,
     r'^fl.aggregator_params.m: needs an integer in \[1, n - f\] = \[1, 9\]'),
    ('multi_krum', {'m': 0}, 10, r'fl.aggregator_params.m'),
    ('geometric_median', {'max_iter': 0}, 10,
     r'fl.aggregator_params.max_iter: needs an integer >= 1, got 0'),
    ('geometric_median', {'max_iter': True}, 10, r'fl.aggregator_params.max_iter'),
    ('geometric_median', {'smoothing': 0}, 10,
     r'fl.aggregator_params.smoothing: needs a number > 0'),
    ('geometric_median', {'eps': -1e-5}, 10, r'fl.aggregator_params.eps: needs a number >= 0'),
    ('geometric_median_per_tensor', {'eps': 0}, 10,
     r'fl.aggregator_params.eps: needs a number > 0, got 0'),
])
def test_errors_name_the_field(name, params, n, message):
  with pytest.raises(ConfigError, match=message):
    aggregators.resolve_params(name, params, n)
