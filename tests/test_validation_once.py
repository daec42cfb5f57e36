"""A config is validated once per run: by the command (``run``) or by the study that
plans it (``compare``), never again by the driver or the data build."""
import os

import pytest

from experiments import run as cli
from tff_noisy import validation
from tff_noisy.data import federated as federated_data

_DEMO = os.path.join(os.path.dirname(__file__), '..', 'experiments', 'configs', 'demo.yaml')
_ARGS = [_DEMO, '--set', 'fl.rounds=2', '--set', 'method.name=fedavg', '--set', 'method.params={}', '--set',
         'fl.client_runtime=tf', '--set', 'partition.num_clients=4']


@pytest.fixture
def counted(monkeypatch):
  calls = {'experiment': 0, 'data': 0}
  real_experiment = validation.validate_experiment
  real_data = federated_data.validate_config

  def experiment(config, *args):
    calls['experiment'] += 1
    return real_experiment(config, *args)

  def data(config, *args):
    calls['data'] += 1
    return real_data(config, *args)

  monkeypatch.setattr(validation, 'validate_experiment', experiment)
  monkeypatch.setattr(federated_data, 'validate_config', data)
  return calls


def test_a_run_is_validated_once(counted, tmp_path, tmp_cache):
  cli.main(['run', *_ARGS, '--out', str(tmp_path / 'run')])
  assert counted == {'experiment': 1, 'data': 1}


@pytest.mark.slow
def test_each_compared_method_is_validated_once(counted, tmp_path, tmp_cache):
  cli.main(['compare', *_ARGS, '--methods', 'fedavg,fedprox', '--out', str(tmp_path / 'c')])
  assert counted == {'experiment': 2, 'data': 2}
