"""Checkpoints round-trip the server state structure, the client state store and history."""
import collections

import numpy as np
import pytest

from tff_noisy.simulation import checkpoint
from tff_noisy.simulation.client_state import ClientStateStore


def _state(offset):
  return collections.OrderedDict(
      weights=[np.arange(6.0).reshape(2, 3) + offset, np.ones(3) * offset],
      optimizer=collections.OrderedDict(step=np.int64(offset)))


def test_round_trip_keeps_the_latest_complete_checkpoint(tmp_path):
  store = ClientStateStore()
  store.set('client_000', 'labels', np.array([1, 2, 3]))
  store.set('client_001', 'noise_estimate', 0.25)
  directory = str(tmp_path / 'ckpt')
  checkpoint.save(directory, 2, _state(2), ClientStateStore(), [{'round': 1}, {'round': 2}])
  checkpoint.save(directory, 4, _state(4), store, [{'round': 4}])
  round_num, state, loaded, history = checkpoint.load(directory, _state(0))
  assert round_num == 4 and history == [{'round': 4}]
  np.testing.assert_array_equal(state['weights'][0], _state(4)['weights'][0])
  assert int(state['optimizer']['step']) == 4
  np.testing.assert_array_equal(loaded.get('client_000', 'labels'), [1, 2, 3])
  assert loaded.get('client_001', 'noise_estimate') == 0.25
  assert loaded.get('client_002', 'labels', 'absent') == 'absent'
  assert sorted(p.name for p in (tmp_path / 'ckpt').iterdir()) == ['LATEST', 'round_00004']


def test_missing_checkpoint_and_mismatched_structure(tmp_path):
  assert checkpoint.load(str(tmp_path / 'none'), _state(0)) is None
  checkpoint.save(str(tmp_path / 'c'), 1, _state(1), ClientStateStore(), [])
  with pytest.raises(ValueError, match='different model or method'):
    checkpoint.load(str(tmp_path / 'c'), {'only': np.zeros(1)})
