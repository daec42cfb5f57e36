"""Faulty clients: the seeded choices, each behaviour by hand, and the TensorFlow twin."""
import numpy as np
import pytest

from tff_noisy.ops import faults
from tff_noisy.ops import faults_tf

_IDS = [f'client_{i:03d}' for i in range(20)]


def _update():
  rng = np.random.default_rng(0)
  return [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)]


def test_byzantine_set_is_fixed_by_the_seed():
  chosen = faults.byzantine_clients(_IDS, 0.3, seed=0)
  assert len(chosen) == 6 and chosen == sorted(chosen) and set(chosen) <= set(_IDS)
  assert faults.byzantine_clients(_IDS, 0.3, seed=0) == chosen
  assert faults.byzantine_clients(_IDS, 0.3, seed=1) != chosen
  assert faults.byzantine_clients(_IDS, 0.0, seed=0) == []
  # Round-half-up of fraction x clients, whatever the float rounding of 0.3 * 10 or 0.15 * 10.
  assert [len(faults.byzantine_clients(_IDS[:10], f, 0)) for f in (0.3, 0.15, 0.14, 0.25)] == [
      3, 2, 1, 3]


def test_dropouts_are_fixed_by_seed_and_round():
  sampled = _IDS[:10]
  dropped = faults.dropped_clients(sampled, 0.3, seed=0, round_num=5)
  assert len(dropped) == 3 and set(dropped) <= set(sampled)
  assert faults.dropped_clients(sampled, 0.3, seed=0, round_num=5) == dropped
  others = [faults.dropped_clients(sampled, 0.3, seed=0, round_num=r) for r in range(6, 12)]
  assert any(d != dropped for d in others)
  assert faults.dropped_clients(sampled, 0.0, seed=0, round_num=5) == []
  assert faults.dropped_clients(sampled[:1], 0.5, seed=0, round_num=5) == sampled[:1]


def test_noise_seed_depends_on_seed_round_and_client():
  seeds = {faults.noise_seed(s, r, c) for s in (0, 1) for r in (1, 2) for c in (0, 1)}
  assert len(seeds) == 8 and faults.noise_seed(0, 1, 0) == faults.noise_seed(0, 1, 0)


def test_each_behaviour_by_hand():
  update = _update()
  spec = lambda behaviour, **kw: faults.fault_spec(behaviour, kw.get('factor', 100.0),
                                                   kw.get('std', 1.0), kw.get('seed', 7))
  for got, want in zip(faults.corrupt(update, spec(None)), update):
    np.testing.assert_array_equal(got, want)
  for got, want in zip(faults.corrupt(update, spec('scale', factor=100.0)), update):
    np.testing.assert_array_equal(got, want * np.float32(100.0))
  for got, want in zip(faults.corrupt(update, spec('sign_flip')), update):
    np.testing.assert_array_equal(got, -want)
  assert all(np.isnan(u).all() for u in faults.corrupt(update, spec('nan')))
  big = [np.zeros((200, 100), np.float32), np.ones((50,), np.float32)]
  noise = faults.corrupt(big, spec('gaussian', std=2.5))
  assert [n.shape for n in noise] == [(200, 100), (50,)] and noise[0].dtype == np.float32
  assert abs(noise[0].std() - 2.5) < 0.05 and abs(noise[0].mean()) < 0.05
  # In place of the update, not added to it; the same seed draws the same noise.
  assert abs(noise[1].mean()) < 1.0
  np.testing.assert_array_equal(faults.corrupt(big, spec('gaussian', std=2.5))[0], noise[0])


@pytest.mark.parametrize('behaviour', [None, 'scale', 'sign_flip', 'nan'])
def test_tensorflow_twin_equals_numpy(behaviour):
  update = _update()
  spec = faults.fault_spec(behaviour, 37.5, 1.0, 3)
  got = faults_tf.corrupt(update, spec)
  for tf_value, np_value in zip(got, faults.corrupt(update, spec)):
    np.testing.assert_array_equal(np.asarray(tf_value), np_value)


def test_tensorflow_gaussian_is_seeded_noise_of_that_std():
  """The twin draws from TensorFlow's stateless generator: same law, same seed same draw."""
  big = [np.full((200, 100), 5.0, np.float32), np.full((1000,), 5.0, np.float32)]
  spec = faults.fault_spec('gaussian', 100.0, 0.5, 11)
  first = [t.numpy() for t in faults_tf.corrupt(big, spec)]
  again = [t.numpy() for t in faults_tf.corrupt(big, spec)]
  other = [t.numpy() for t in faults_tf.corrupt(big, faults.fault_spec('gaussian', 100.0,
                                                                        0.5, 12))]
  for a, b in zip(first, again):
    np.testing.assert_array_equal(a, b)
  assert not np.array_equal(first[0], other[0])
  assert not np.array_equal(first[0][:10, 0], first[1][:10])  # Each tensor its own draw.
  for noise in first:
    assert noise.dtype == np.float32
    assert abs(noise.std() - 0.5) < 0.03 and abs(noise.mean()) < 0.05  # Replaces the 5s.
