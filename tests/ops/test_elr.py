"""Early-Learning Regularization (Liu et al. 2020): the target update (clamp, renormalise,
momentum) and the loss by hand, the regulariser's gradient against the paper's closed form
and finite differences, the clamp's zero gradient, and the TensorFlow twin against NumPy."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import elr
from tff_noisy.ops import elr_tf

# Two classes, logits (0, log 3): p = (1/4, 3/4), inside the clamp.
_A = [0.0, np.log(3.0)]


def test_initial_targets_are_zero():
  t = elr.initial_targets(3, 2)
  assert t.shape == (3, 2) and t.dtype == np.float32 and not t.any()


def test_target_update_by_hand():
  # From t = 0 with β = 0.7: t = 0.3·p = (0.075, 0.225).
  np.testing.assert_allclose(elr.updated_targets([[0.0, 0.0]], [_A], 0.7), [[0.075, 0.225]])
  # From t = (1, 0) with β = 0.5: (0.5, 0) + 0.5·(1/4, 3/4) = (0.625, 0.375).
  np.testing.assert_allclose(elr.updated_targets([[1.0, 0.0]], [_A], 0.5), [[0.625, 0.375]])
  # Logits (0, 20, 20): p ≈ (1e-9, 1/2, 1/2), clamped to (1e-4, 1/2, 1/2), which sums to
  # 1.0001, so p̂ = (1e-4, 1/2, 1/2)/1.0001 (to ~1e-9: p_2 = p_3 = 1/2 − 1e-9); with β = 0
  # the target is p̂.
  want = np.array([1e-4, 0.5, 0.5]) / 1.0001
  np.testing.assert_allclose(elr.updated_targets([[0.0, 0.0, 0.0]], [[0.0, 20.0, 20.0]], 0.0),
                             [want], rtol=1e-8)
  np.testing.assert_allclose(elr.clamped_probabilities([[0.0, 20.0, 20.0]]), [[1e-4, 0.5, 0.5]],
                             rtol=1e-8)


def test_loss_by_hand():
  # t = (0.075, 0.225) (the first update above): ⟨t, p⟩ = 0.075/4 + 0.225·3/4 = 0.1875, so
  # the regulariser is log(0.8125); with y = 1 the cross-entropy is -log(3/4).
  t = [[0.075, 0.225]]
  np.testing.assert_allclose(elr.regulariser(t, [_A]), [np.log(0.8125)])
  np.testing.assert_allclose(elr.elr_loss([1], [_A], t, lam=3.0),
                             [-np.log(0.75) + 3 * np.log(0.8125)])
  # λ = 0 is the cross-entropy; y = 0: -log(1/4).
  np.testing.assert_allclose(elr.elr_loss([0], [_A], t, lam=0.0), [-np.log(0.25)])
  with pytest.raises(ValueError, match='outside'):
    elr.elr_loss([2], [_A], t, lam=3.0)


def test_the_tf_twin_agrees_with_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(5, 4)) * 3
  logits[0] = [0.0, 30.0, 0.0, 0.0]  # A row with clamped entries.
  targets = rng.dirichlet(np.ones(4), size=5) * 0.6
  new = elr_tf.updated_targets(tf.constant(targets, tf.float64),
                               tf.constant(logits, tf.float64), 0.7)
  np.testing.assert_allclose(new.numpy(), elr.updated_targets(targets, logits, 0.7), rtol=1e-12)
  term = elr_tf.elr_term(tf.constant(targets, tf.float64),
                         tf.constant(logits, tf.float64), 3.0)
  np.testing.assert_allclose(term.numpy(), 3.0 * elr.regulariser(targets, logits), rtol=1e-12)
  # float32 targets beside float32 logits, as the clients train.
  new32 = elr_tf.updated_targets(tf.constant(targets, tf.float32),
                                 tf.constant(logits, tf.float32), 0.7)
  assert new32.dtype == tf.float32
  np.testing.assert_allclose(new32.numpy(), elr.updated_targets(targets, logits, 0.7), rtol=1e-5)


def test_the_regulariser_gradient_is_the_paper_s():
  """d/dz_k log(1 − ⟨t, p⟩) = −p_k (t_k − ⟨t, p⟩)/(1 − ⟨t, p⟩) (Liu et al. 2020, Sec. 4.2).
  With t = (0.075, 0.225), p = (1/4, 3/4): ⟨t, p⟩ = 0.1875, so the gradient is
  (0.25·0.1125, −0.75·0.0375)/0.8125 = (±0.0346153...); the targets carry none."""
  logits = tf.Variable([_A], dtype=tf.float64)
  targets = tf.Variable([[0.075, 0.225]], dtype=tf.float64)
  with tf.GradientTape(persistent=True) as tape:
    reg = tf.reduce_sum(elr_tf.regulariser(targets, logits))
  np.testing.assert_allclose(tape.gradient(reg, logits).numpy(),
                             [[0.028125 / 0.8125, -0.028125 / 0.8125]], rtol=1e-12)
  assert tape.gradient(reg, targets) is None
  # Finite differences of the NumPy loss (CE + λ·reg at fixed targets) on random logits.
  rng = np.random.default_rng(1)
  z, t, y = rng.normal(size=(3, 4)), rng.dirichlet(np.ones(4), size=3) * 0.5, [0, 3, 1]
  variable = tf.Variable(z)
  with tf.GradientTape() as tape:
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant(y), variable)
    loss = tf.reduce_sum(ce + elr_tf.elr_term(tf.constant(t), variable, 3.0))
  grad = tape.gradient(loss, variable).numpy()
  eps, numeric = 1e-6, np.zeros_like(z)
  for i in np.ndindex(z.shape):
    up, down = z.copy(), z.copy()
    up[i] += eps
    down[i] -= eps
    numeric[i] = (elr.elr_loss(y, up, t, 3.0).sum()
                  - elr.elr_loss(y, down, t, 3.0).sum()) / (2 * eps)
  np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_clamped_probabilities_carry_no_gradient():
  # Logits (0, 20): p = (2e-9, 1 − 2e-9), both outside [1e-4, 1 − 1e-4]: the regulariser's
  # gradient is 0 (torch.clamp's, as the authors' code), although ⟨t, p⟩ depends on z.
  logits = tf.Variable([[0.0, 20.0]], dtype=tf.float64)
  with tf.GradientTape() as tape:
    reg = tf.reduce_sum(elr_tf.regulariser(tf.constant([[0.3, 0.4]], tf.float64), logits))
  np.testing.assert_array_equal(tape.gradient(reg, logits).numpy(), [[0.0, 0.0]])
  # Its value: log(1 − (0.3·1e-4 + 0.4·(1 − 1e-4))).
  assert float(reg) == pytest.approx(np.log(1 - (0.3e-4 + 0.4 * 0.9999)), rel=1e-12)
