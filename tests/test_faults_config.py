"""The `faults:` section: one-line errors, and no effect on data keys or old identities."""
import os

import pytest

from experiments import run as cli
from tff_noisy import catalog
from tff_noisy import config as config_lib
from tff_noisy.simulation import checkpoint

_CONFIG = os.path.join(os.path.dirname(__file__), '..', 'experiments', 'configs',
                       'faults_digits.yaml')


@pytest.mark.parametrize('override, message', [
    ('faults.dropout=1.5', 'faults.dropout: must be in [0, 1), got 1.5'),
    ('faults.dropout=1', 'faults.dropout: must be in [0, 1), got 1.0'),
    ('faults.byzantine=-0.1', 'faults.byzantine: must be in [0, 1], got -0.1'),
    ('faults.behaviour=flip',
     "faults.behaviour: unknown behaviour 'flip'; did you mean 'sign_flip'? Allowed: scale, "
     'sign_flip, gaussian, nan'),
    ('faults.std=-1', 'faults.std: must be a finite number >= 0, got -1.0'),
    ('faults.factor=.inf', 'faults.factor: must be a finite number, got inf'),
    ('faults.dropout=yes', 'faults.dropout: expected a number, got True'),
    ('faults.droput=0.1',
     "unknown config key 'faults.droput'; did you mean 'dropout'? Allowed here: dropout, "
     'byzantine, behaviour, factor, std'),
    ('faults.byzantine=0.01', 'faults.byzantine: 0.01 of 10 (partition.num_clients) rounds '
                              'to no client; use 0 or at least 0.05'),
    ('faults.dropout=0.04', 'faults.dropout: 0.04 of 10 (the clients sampled per round) '
                            'rounds to no client; use 0 or at least 0.05'),
    ('faults.dropout=0.96', 'faults.dropout: 0.96 of 10 (the clients sampled per round) '
                            'drops all 10, so no round trains; use less than 0.95'),
    ('faults.dropout=0.5 fl.clients_per_round=1',
     'faults.dropout: 0.5 of the 1 client sampled per round drops it every round or never; '
     'use 0, or sample more clients'),
])
def test_bad_faults_are_one_line_errors(capsys, tmp_path, override, message):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', _CONFIG, *[arg for item in override.split() for arg in ('--set', item)],
              '--out', str(tmp_path)])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err == f'tff-noisy: error: {message}\n'


def test_a_dropout_that_leaves_one_sampled_client_is_accepted():
  config = config_lib.load(_CONFIG, ['fl.clients_per_round=5', 'faults.dropout=0.89'])
  assert config_lib.faults_lib.count(config.faults.dropout, 5) == 4
  with pytest.raises(config_lib.ConfigError, match='0.9 of 5 .* drops all 5, so no round '
                                                   r'trains; use less than 0\.9$'):
    config_lib.load(_CONFIG, ['fl.clients_per_round=5', 'faults.dropout=0.9'])


def test_faults_change_the_run_identity_but_not_the_data():
  plain = config_lib.resolve_client_runtime(config_lib.load(_CONFIG))
  faulty = config_lib.resolve_client_runtime(
      config_lib.load(_CONFIG, ['faults.byzantine=0.3', 'faults.behaviour=sign_flip']))
  assert faulty.data_hash() == plain.data_hash() and 'faults' not in plain.data_dict()
  shapes = [(64, 128)]
  # At its defaults the section is left out, so checkpoints written before it still match.
  assert not [k for k in checkpoint.identity_of(plain, shapes) if k.startswith('faults.')]
  identity = checkpoint.identity_of(faulty, shapes)
  assert (identity['faults.byzantine'], identity['faults.behaviour']) == (0.3, 'sign_flip')
  assert not faulty.faults.dropout and faulty.faults.active() and not plain.faults.active()


def test_list_shows_the_behaviours_and_their_fields():
  text = catalog.render('faults')
  assert text.splitlines()[0] == 'faults (faults.behaviour; fields under faults)'
  assert [c.name for c in catalog.section('faults').choices] == [
      'scale', 'sign_flip', 'gaussian', 'nan']
  assert 'factor: 100.0  # scale: the update is multiplied by this.' in text
  assert 'dropout: 0.0    # Fraction of each round' in text


def test_faults_are_refused_with_clients_in_the_tflite_interpreter(capsys, tmp_path):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', _CONFIG, '--set', 'faults.byzantine=0.3', '--set',
              'fl.client_runtime=tflite', '--out', str(tmp_path)])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == (
      'tff-noisy: error: faults: simulated faults run in the TFF client work; they are not '
      'available with fl.client_runtime: tflite (use tff)\n')
