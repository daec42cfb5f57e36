"""FedEFC and forward correction through the driver on digits: the switch, its diagnostics,
stage 1 against FedAvg, and restarts across the switch.

t_mon = 1 and gamma = 2 make the prestopping rule fire after a few rounds of this tiny
config (round 6 for seed 5; the tests read it from the records rather than assume it).
"""
import json
import os

import numpy as np
import pytest

import helpers
from tff_noisy import config as config_lib
from tff_noisy.simulation import driver

_PARAMS = {'t_mon': 1, 'gamma': 2}


def _config(rounds, method='fedefc', params=None, **fl):
  return config_lib.from_dict({
      'seed': 5, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 5},
      'noise': {'name': 'symmetric', 'rate': 0.2, 'noisy_fraction': 0.4},
      'model': {'name': 'mlp'},
      'method': {'name': method, 'params': _PARAMS if params is None else params},
      'fl': {'rounds': rounds, 'clients_per_round': 2, 'batch_size': 32, 'client_lr': 0.1,
             'checkpoint_every': 2, **fl},
  })


def _switch_round(results):
  return results.rounds[-1]['prestop']['switch_round']


@pytest.mark.slow
def test_fedefc_switches_after_gamma_stale_rounds_and_reports_matrix_errors(tmp_path,
                                                                           tmp_cache):
  results = driver.run_experiment(_config(7), str(tmp_path / 'run'))
  switch = _switch_round(results)
  assert switch is not None and 1 + _PARAMS['gamma'] <= switch < 7
  records = {r['round']: r['prestop'] for r in results.rounds}
  # The signal is the received model's mean accuracy on the clients' own labels.
  assert all(r['prestop']['signal'] == r['objective']['received_accuracy']
             for r in results.rounds)
  stale = [records[t]['count'] for t in range(switch - _PARAMS['gamma'] + 1, switch + 1)]
  assert stale == list(range(1, _PARAMS['gamma'] + 1))
  assert records[switch - _PARAMS['gamma']]['count'] == 0
  assert [records[t]['corrected'] for t in sorted(records)] == (
      [0] * switch + [1] * (7 - switch))
  assert all(records[t]['switch_round'] == switch for t in range(switch, 8))
  # Matrix errors against the truth, for the clients of the first corrected round only.
  with_errors = [r for r in results.rounds if 'transition_matrix_error' in r]
  assert [r['round'] for r in with_errors] == [switch + 1]
  errors = with_errors[0]['transition_matrix_error']
  assert set(errors) == {'confident_joint', 'anchor'}
  for report in errors.values():
    assert set(report['per_client']) == set(with_errors[0]['clients'])
    assert 0.0 < report['mean_cosine'] <= 1.0 and report['mean_l1'] >= 0.0
  assert 'transition_estimates' not in with_errors[0]
  saved = json.load(open(os.path.join(tmp_path, 'run', 'results.json')))
  assert saved['rounds'][-1]['prestop']['switch_round'] == switch


def _keys(record):
  return {k: record.get(k) for k in ('clients', 'train_loss', 'test_accuracy', 'prestop',
                                     'objective', 'transition_matrix_error')}


@pytest.mark.slow
def test_stage_one_is_fedavg_and_both_corrections_share_the_switch(tmp_path, tmp_cache):
  """With the training signal stage 1 is FedAvg byte for byte; FedEFC and forward
  correction then switch at the same round and part ways."""
  params = dict(_PARAMS, signal='training', report_matrix_error=False)
  # FedEFC's clients cannot be stacked: FedAvg's train one call each too, so all three
  # run the same kernel (stacked FedAvg equals it to rounding, not byte for byte).
  same_path = {'client_runtime': 'tf', 'stack_clients': False}
  fedavg = driver.run_experiment(_config(7, 'fedavg', {}, **same_path),
                                 str(tmp_path / 'fedavg'))
  fedefc = driver.run_experiment(_config(7, 'fedefc', params, **same_path),
                                 str(tmp_path / 'fedefc'))
  forward = driver.run_experiment(_config(7, 'forward_correction', params, **same_path),
                                  str(tmp_path / 'fc'))
  switch = _switch_round(fedefc)
  assert switch is not None and switch < 7 and _switch_round(forward) == switch
  stage_one = slice(0, switch)  # Rounds 1..T_e train with cross-entropy.
  assert [r['train_loss'] for r in fedefc.rounds[stage_one]] == [
      r['train_loss'] for r in fedavg.rounds[stage_one]]
  assert [_keys(r) for r in forward.rounds[stage_one]] == [
      _keys(r) for r in fedefc.rounds[stage_one]]
  after = switch  # Round T_e + 1, the first corrected one.
  assert fedefc.rounds[after]['train_loss'] != fedavg.rounds[after]['train_loss']
  assert fedefc.rounds[after]['train_loss'] != forward.rounds[after]['train_loss']


@pytest.mark.slow
def test_restarts_across_the_switch_equal_the_uninterrupted_run(tmp_path, tmp_cache):
  reference = helpers.run_with_restarts(_config(9), str(tmp_path / 'ref'))
  switch = _switch_round(reference.results())
  assert switch is not None and switch + 2 <= 9
  before = switch - 1  # Mid-count: the counter has started but not fired.
  assert reference.history[before - 1]['prestop']['count'] >= 1
  resumed = helpers.run_with_restarts(_config(9), str(tmp_path / 'restarted'),
                                      restart_after=[before, switch + 1])  # And after the
  # first corrected round.
  assert [_keys(r) for r in resumed.history] == [_keys(r) for r in reference.history]
  for ours, theirs in zip(resumed.final_weights(), reference.final_weights()):
    np.testing.assert_array_equal(ours, theirs)
