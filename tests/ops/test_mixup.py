"""Mixup (Zhang et al. 2018, Eq. 1; FedCorr's local training): the mixing and the mixed
cross-entropy by hand, the TensorFlow twin against NumPy, and the stateless draws of λ
and the permutation."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import mixup
from tff_noisy.ops import mixup_tf


def test_mixing_and_mixed_cross_entropy_by_hand():
  x = np.array([[0.0, 4.0], [8.0, 0.0]])
  np.testing.assert_allclose(mixup.mix(x, 0.25, [1, 0]), [[6.0, 1.0], [2.0, 3.0]])
  # Two classes, logits (0, log 3): p = (1/4, 3/4); labels (0, 1), partners (1, 0).
  logits = np.array([[0.0, np.log(3.0)], [0.0, np.log(3.0)]])
  want = [-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)),
          -(0.25 * np.log(0.75) + 0.75 * np.log(0.25))]
  np.testing.assert_allclose(mixup.mixed_cross_entropy(logits, [0, 1], [1, 0], 0.25), want)


def test_the_tensorflow_twin_equals_numpy():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6, 3, 2)).astype(np.float32)
  logits = rng.normal(size=(6, 4)).astype(np.float32)
  labels = rng.integers(0, 4, 6)
  permutation = rng.permutation(6)
  np.testing.assert_allclose(mixup_tf.mix(tf.constant(x), 0.3, permutation),
                             mixup.mix(x, 0.3, permutation), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(
      mixup_tf.mixed_cross_entropy(logits, labels, permutation, tf.constant(0.3)),
      mixup.mixed_cross_entropy(logits, labels, permutation, 0.3), rtol=1e-5)


@pytest.mark.parametrize('alpha', [1.0, 0.2])
def test_draws_are_a_permutation_and_beta_distributed_and_fixed_by_the_seed(alpha):
  draws = [mixup_tf.draw(tf.constant([7, i]), 10, alpha) for i in range(600)]
  lams = np.array([float(lam) for lam, _ in draws])
  for _, permutation in draws[:20]:
    assert sorted(permutation.numpy()) == list(range(10))
  assert len({tuple(p.numpy()) for _, p in draws[:20]}) == 20
  # Beta(α, α): mean 1/2, variance 1 / (4 (2α + 1)).
  assert lams.min() >= 0 and lams.max() <= 1
  assert lams.mean() == pytest.approx(0.5, abs=0.03)
  assert lams.var() == pytest.approx(1 / (4 * (2 * alpha + 1)), rel=0.12)
  again, permutation = mixup_tf.draw(tf.constant([7, 3]), 10, alpha)
  assert float(again) == lams[3]
  np.testing.assert_array_equal(permutation, draws[3][1])
