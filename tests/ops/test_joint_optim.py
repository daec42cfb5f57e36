"""Joint Optimization (Tanaka et al. 2018): the three loss terms by hand (and their relation
to the codes' forms), the history ring buffer and the soft/hard label update (with and
without dividing by the written slots), and the TensorFlow twin against NumPy, its
gradient against finite differences of the NumPy loss."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import joint_optim as jo
from tff_noisy.ops import joint_optim_tf as jo_tf

# Two classes, logits (0, log 3): s = (1/4, 3/4); logits (log 3, 0): s = (3/4, 1/4).
_A = [0.0, np.log(3.0)]
_B = [np.log(3.0), 0.0]


def test_init_state():
  labels, history, count = jo.init_state([2, 0], 3, 4)
  np.testing.assert_array_equal(labels, [[0, 0, 1], [1, 0, 0]])
  assert labels.dtype == np.float32 and history.shape == (2, 4, 3) and not history.any()
  np.testing.assert_array_equal(count, [0, 0])
  with pytest.raises(ValueError, match='outside'):
    jo.init_state([3], 3, 4)


def test_loss_terms_by_hand():
  logits = np.array([_A, _A])
  # L_c with y = (1/2, 1/2): -(1/2 log 1/4 + 1/2 log 3/4) per example.
  ce = -(0.5 * np.log(0.25) + 0.5 * np.log(0.75))
  np.testing.assert_allclose(jo.classification_loss([[0.5, 0.5]] * 2, logits), [ce, ce])
  # L_e: H(1/4, 3/4) per example.
  h = -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))
  np.testing.assert_allclose(jo.entropy_loss(logits), [h, h])
  # L_p, s̄ = (1/4, 3/4), p uniform: 1/2 log(1/2 / 1/4) + 1/2 log(1/2 / 3/4) = 1/2 log(4/3).
  assert jo.prior_loss(logits) == pytest.approx(0.5 * np.log(4 / 3))
  # The codes' -Σ p log s̄ is that plus H(p) = log 2.
  assert -0.5 * np.log(0.25) - 0.5 * np.log(0.75) == pytest.approx(
      jo.prior_loss(logits) + np.log(2))
  # s̄ = p: 0; balanced batch under the uniform prior: 0.
  assert jo.prior_loss(logits, prior=[0.25, 0.75]) == pytest.approx(0.0, abs=1e-15)
  assert jo.prior_loss(np.array([_A, _B])) == pytest.approx(0.0, abs=1e-15)
  with pytest.raises(ValueError, match='prior'):
    jo.prior_loss(logits, prior=[0.5, 0.6])


def test_joint_loss_is_ce_plus_alpha_prior_plus_beta_entropy():
  logits = np.array([_A, _A])
  labels = np.array([[1.0, 0.0], [0.0, 1.0]])
  got = jo.joint_loss(labels, logits, alpha=1.2, beta=0.8)
  h = -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))
  lp = 0.5 * np.log(4 / 3)
  np.testing.assert_allclose(got, [-np.log(0.25) + 1.2 * lp + 0.8 * h,
                                   -np.log(0.75) + 1.2 * lp + 0.8 * h])


def test_history_and_label_update_by_hand():
  # q = 3, C = 2. Row 0 has one output written (count 0 → slot 0), row 1 has four (count 3
  # → slot 0, overwriting the oldest), row 2 none.
  history = np.zeros((3, 3, 2), np.float32)
  history[1] = [[0.1, 0.9], [0.3, 0.7], [0.5, 0.5]]
  count = np.array([0, 3, 0], np.int32)
  probs = np.array([[0.6, 0.4], [0.2, 0.8], [0.0, 1.0]], np.float32)
  history, count = jo.update_history(history[:2], count[:2], probs[:2])
  np.testing.assert_allclose(history[0], [[0.6, 0.4], [0, 0], [0, 0]])
  np.testing.assert_allclose(history[1], [[0.2, 0.8], [0.3, 0.7], [0.5, 0.5]])
  np.testing.assert_array_equal(count, [1, 4])
  history = np.concatenate([history, np.zeros((1, 3, 2), np.float32)])
  count = np.append(count, 0).astype(np.int32)
  labels = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], np.float32)
  # Both codes: Σ/q, so row 0 is (0.6, 0.4)/3, not a distribution; row 1 (1.0, 2.0)/3;
  # row 2 (nothing written) keeps its label.
  np.testing.assert_allclose(jo.updated_labels(history, count, labels),
                             [[0.2, 0.4 / 3], [1 / 3, 2 / 3], [0, 1]], rtol=1e-6)
  # Dividing by the written slots: row 0 is its one output.
  np.testing.assert_allclose(jo.updated_labels(history, count, labels, divide_by_filled=True),
                             [[0.6, 0.4], [1 / 3, 2 / 3], [0, 1]], rtol=1e-6)
  np.testing.assert_array_equal(jo.updated_labels(history, count, labels, hard=True),
                                [[1, 0], [0, 1], [0, 1]])
  # A partly written history scales L_c down: CE against (0.6, 0.4)/3 is a third of CE
  # against (0.6, 0.4).
  soft = jo.updated_labels(history, count, labels)[:1]
  full = jo.updated_labels(history, count, labels, divide_by_filled=True)[:1]
  np.testing.assert_allclose(jo.classification_loss(soft, [_A]),
                             jo.classification_loss(full, [_A]) / 3, rtol=1e-6)


def test_hard_labels_break_ties_to_the_smaller_class():
  history = np.array([[[0.5, 0.5]]], np.float32)
  np.testing.assert_array_equal(jo.updated_labels(history, [1], [[0.0, 1.0]], hard=True),
                                [[1, 0]])
  got = jo_tf.updated_labels(tf.constant(history), tf.constant([1]), tf.constant([[0.0, 1.0]]),
                             hard=True)
  np.testing.assert_array_equal(got, [[1, 0]])


def test_label_report():
  # Labels' argmax (1, 0, 2, 2); true (1, 1, 2, 0); observed (0, 1, 2, 0): flipped {0}.
  labels = np.eye(3)[[1, 0, 2, 2]]
  report = jo.label_report(labels, [1, 1, 2, 0], [0, 1, 2, 0])
  assert report == {'accuracy': 0.5, 'flips_corrected': 1.0, 'clean_kept': pytest.approx(1 / 3)}


def _random(rng, batch=7, classes=4, queue=3):
  logits = rng.normal(scale=2.0, size=(batch, classes))
  labels = rng.dirichlet(np.ones(classes), size=batch)
  history = rng.dirichlet(np.ones(classes), size=(batch, queue)).astype(np.float32)
  count = rng.integers(0, 2 * queue, batch).astype(np.int32)
  return logits, labels, history, count


@pytest.mark.parametrize('uniform', [True, False])
def test_the_tensorflow_twin_equals_numpy(uniform):
  rng = np.random.default_rng(int(uniform))
  logits, labels, history, count = _random(rng)
  prior = None if uniform else rng.dirichlet(np.ones(4))
  got = jo_tf.joint_loss(tf.constant(labels, tf.float32), tf.constant(logits, tf.float32),
                         1.2, 0.8, prior)
  np.testing.assert_allclose(got, jo.joint_loss(labels, logits, 1.2, 0.8, prior), rtol=1e-5)
  assert float(jo_tf.prior_loss(tf.constant(logits), prior)) == pytest.approx(
      jo.prior_loss(logits, prior), rel=1e-10)
  probs = rng.dirichlet(np.ones(4), size=7).astype(np.float32)
  want_history, want_count = jo.update_history(history, count, probs)
  got_history, got_count = jo_tf.update_history(tf.constant(history), tf.constant(count),
                                                tf.constant(probs))
  np.testing.assert_allclose(got_history, want_history)
  np.testing.assert_array_equal(got_count, want_count)
  for hard in (False, True):
    for divide_by_filled in (False, True):
      got = jo_tf.updated_labels(tf.constant(history), tf.constant(count),
                                 tf.constant(labels, tf.float32), hard, divide_by_filled)
      np.testing.assert_allclose(got, jo.updated_labels(history, count, labels, hard,
                                                        divide_by_filled), rtol=1e-6)


def test_gradient_matches_finite_differences_through_the_batch_mean():
  rng = np.random.default_rng(5)
  logits, labels, _, _ = _random(rng, batch=5, classes=3)
  variable = tf.Variable(logits, dtype=tf.float64)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(jo_tf.joint_loss(tf.constant(labels), variable, 1.2, 0.8))
  grad = tape.gradient(loss, variable).numpy()
  step = 1e-6
  numeric = np.zeros_like(logits)
  for index in np.ndindex(*logits.shape):
    up, down = logits.copy(), logits.copy()
    up[index] += step
    down[index] -= step
    numeric[index] = (jo.joint_loss(labels, up, 1.2, 0.8).mean()
                      - jo.joint_loss(labels, down, 1.2, 0.8).mean()) / (2 * step)
  np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
  # Without L_p the gradient differs: s̄ carries part of it.
  with tf.GradientTape() as tape:
    no_prior = tf.reduce_mean(jo_tf.joint_loss(tf.constant(labels), variable, 0.0, 0.8))
  assert np.abs(tape.gradient(no_prior, variable).numpy() - grad).max() > 1e-3
