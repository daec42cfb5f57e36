"""MaskedOptim through the driver on digits: detection on every client after warm-up,
the flags and label logits kept in the store and the checkpoint, the per-round reports
against the simulation truth, and a restart across the detection round.

Six clients with symmetric noise rates 0, 0.16, ..., 0.8, three per round, warm-up 2
rounds: detection runs before round 3 (the tests read the flags from the records).
"""
import os

import numpy as np
import pytest

import helpers
from tff_noisy import config as config_lib

_WARMUP = 2
_K = 10.0


def _config(rounds, **params):
  return config_lib.from_dict({
      'seed': 3, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 6},
      'noise': {'name': 'linear', 'min_rate': 0.0, 'max_rate': 0.8, 'flip': 'symmetric'},
      'model': {'name': 'mlp'},
      'method': {'name': 'maskedoptim', 'params': dict(warmup_rounds=_WARMUP, **params)},
      'fl': {'rounds': rounds, 'clients_per_round': 3, 'batch_size': 32, 'client_lr': 0.05,
             'momentum': 0.9, 'checkpoint_every': 2,
             'aggregator': 'geometric_median_per_tensor'},
  })


def _tables(store, ids):
  return {cid: (int(store.get(cid, 'objective.noisy')),
                np.asarray(store.get(cid, 'objective.label_logits'))) for cid in ids}


def _is_initial(logits):
  """K·onehot of some labels."""
  return np.array_equal(logits, _K * np.eye(logits.shape[1], dtype=np.float32)[
      np.argmax(logits, axis=1)])


@pytest.mark.slow
def test_detection_flags_noisy_clients_whose_labels_move_and_persist(tmp_path, tmp_cache):
  simulation = helpers.run_with_restarts(_config(4), str(tmp_path))
  simulation.save_checkpoint(str(tmp_path))
  results = simulation.results()
  rounds = {r['round']: r for r in results.rounds}
  ids = simulation.client_ids
  rates = results.client_noise_rates
  for t in range(1, _WARMUP + 1):
    assert 'detection' not in rounds[t] and 'noisy_clients' not in rounds[t]
    assert rounds[t]['objective']['noisy_client'] == 0.0
  found = rounds[_WARMUP + 1]['detection']
  assert found['status'] == 'ok' and found['probed_clients'] == 6
  assert found['after_round'] == _WARMUP and set(found['class_losses']) == set(ids)
  flagged = found['flagged']
  assert 0 < len(flagged) < 6
  assert np.mean([rates[c] for c in flagged]) > np.mean(
      [rates[c] for c in ids if c not in flagged])
  for t in (_WARMUP + 1, 4):
    assert rounds[t]['noisy_clients'] == flagged  # Fixed after detection.
    truth = rounds[t]['detection_truth']
    assert truth['flagged'] == len(flagged) and truth['truly_noisy'] == 5
    assert truth['recall'] == pytest.approx(
        sum(rates[c] > 0 for c in flagged) / 5)
    accuracy = rounds[t]['label_estimate_accuracy']
    assert set(accuracy['per_client']) == set(flagged) and accuracy['clients'] == len(flagged)
    assert 0 < accuracy['observed_accuracy'] < 1
    share = np.mean([c in flagged for c in rounds[t]['clients']])
    assert rounds[t]['objective']['noisy_client'] == pytest.approx(share)
  # Store: the flags; the logits of the noisy clients that trained after detection moved
  # (K (P + y^d) / 2 sums to K per row); everyone else's are still K·onehot.
  tables = _tables(simulation.store, ids)
  trained_noisy = {c for t in (_WARMUP + 1, 4) for c in rounds[t]['clients'] if c in flagged}
  assert trained_noisy
  for cid, (noisy, logits) in tables.items():
    assert noisy == int(cid in flagged)
    if cid in trained_noisy:
      assert not _is_initial(logits)
      np.testing.assert_allclose(logits.sum(axis=1), _K, rtol=1e-5)
    else:
      assert _is_initial(logits)
  # The last checkpoint holds exactly these flags and logits.
  with np.load(os.path.join(tmp_path, 'round_00004', 'client_state.npz')) as saved:
    for cid, (noisy, logits) in tables.items():
      assert int(saved[f'{cid}/objective.noisy']) == noisy
      np.testing.assert_array_equal(saved[f'{cid}/objective.label_logits'], logits)


def _keys(record):
  return {k: record.get(k) for k in (
      'clients', 'train_loss', 'test_accuracy', 'detection', 'noisy_clients',
      'detection_truth', 'label_estimate_accuracy', 'objective')}


@pytest.mark.slow
def test_restarts_before_and_after_detection_equal_the_uninterrupted_run(tmp_path, tmp_cache):
  reference = helpers.run_with_restarts(_config(6), str(tmp_path / 'ref'))
  ids = reference.client_ids
  # Restarts before detection (round 3), then after it.
  resumed = helpers.run_with_restarts(_config(6), str(tmp_path / 'restarted'),
                                      restart_after=[2, 4])
  assert [_keys(r) for r in resumed.history] == [_keys(r) for r in reference.history]
  assert any('detection' in r for r in resumed.history)
  reference_tables = _tables(reference.store, ids)
  for cid, (noisy, logits) in _tables(resumed.store, ids).items():
    assert noisy == reference_tables[cid][0]
    np.testing.assert_array_equal(logits, reference_tables[cid][1])
