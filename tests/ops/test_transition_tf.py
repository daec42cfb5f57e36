"""The TensorFlow twins of the transition-matrix estimates and of the forward-corrected
loss equal the NumPy ones; minimising the corrected loss with the true matrix recovers the
clean class posterior."""

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import losses
from tff_noisy.ops import transition
from tff_noisy.ops import transition_tf


def _client(seed, n=300, num_classes=6, absent=()):
  rng = np.random.default_rng(seed)
  concentration = rng.uniform(0.2, 3.0, num_classes)
  probs = rng.dirichlet(concentration, size=n).astype(np.float32)
  labels = rng.integers(0, num_classes, n)
  for c in absent:
    labels[labels == c] = (c + 1) % num_classes
  return probs, labels


@pytest.mark.parametrize('seed, absent', [(0, ()), (1, (2,)), (2, (0, 4)), (3, ())])
def test_estimates_equal_numpy(seed, absent):
  probs, labels = _client(seed, absent=absent)
  num_classes = probs.shape[1]
  np.testing.assert_allclose(
      transition_tf.per_class_thresholds(probs, labels, num_classes).numpy(),
      transition.per_class_thresholds(probs, labels), rtol=1e-12)
  for guess in transition.GUESSES:
    np.testing.assert_array_equal(
        transition_tf.confident_joint(probs, labels, num_classes, guess).numpy(),
        transition.confident_joint(probs, labels, guess))
    for normalise in transition.NORMALISATIONS:
      np.testing.assert_allclose(
          transition_tf.estimate_transition_matrix(probs, labels, num_classes, normalise,
                                                   guess).numpy(),
          transition.estimate_transition_matrix(probs, labels, normalise, guess),
          atol=1e-7)
  # The data exercise the rules' difference (2+ confident classes, the global argmax
  # not the likeliest of them), so the agreement above covers both branches.
  assert not np.array_equal(transition.confident_joint(probs, labels, 'passing'),
                            transition.confident_joint(probs, labels, 'cleanlab'))
  for percentile in (97.0, 50.0, 100.0, 33.3):
    np.testing.assert_allclose(
        transition_tf.anchor_transition_matrix(probs, percentile).numpy(),
        transition.anchor_transition_matrix(probs, percentile), atol=1e-7)
  prior = transition.class_prior(labels, num_classes)
  np.testing.assert_allclose(transition_tf.class_prior(labels, num_classes).numpy(), prior,
                             atol=1e-7)
  q = transition.estimate_transition_matrix(probs, labels)
  np.testing.assert_allclose(transition_tf.compensate_prior(q, prior).numpy(),
                             transition.compensate_prior(q, prior), atol=1e-7)


@pytest.mark.parametrize('guess, counts', [
    # test_transition.py's example, derived there: tau = [0.8, 0.3, 0.2, +inf]; rows 0
    # and 1 have 2 confident classes (1, 2), whose likeliest is 1, while the global
    # argmax is 3 (nobody labelled 3) and 0 (below its threshold).
    ('passing', np.diag([1.0, 2.0, 1.0, 0.0])),
    ('cleanlab', [[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0],
                  [0.0, 0.0, 0.0, 0.0]])])
def test_the_two_guess_rules_by_hand(guess, counts):
  probs = np.array([[0.10, 0.30, 0.20, 0.40], [0.45, 0.30, 0.20, 0.05],
                    [0.80, 0.10, 0.05, 0.05], [0.50, 0.10, 0.20, 0.20]], np.float32)
  labels = np.array([1, 1, 0, 2])
  np.testing.assert_array_equal(
      transition_tf.confident_joint(probs, labels, 4, guess).numpy(), counts)
  np.testing.assert_allclose(
      transition_tf.estimate_transition_matrix(probs, labels, 4, guess=guess).numpy(),
      transition.estimate_transition_matrix(probs, labels, guess=guess), atol=1e-7)
  with pytest.raises(ValueError, match='guess must be one of passing, cleanlab'):
    transition_tf.confident_joint(probs, labels, 4, 'max')


def test_singularity_equals_numpy():
  for matrix in (np.eye(3), [[0.5, 0.5], [0.5, 0.5]], [[0.9, 0.2], [0.1, 0.8]],
                 [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]):
    assert bool(transition_tf.is_singular(np.asarray(matrix, np.float32))) == (
        transition.is_singular(matrix))


def test_forward_loss_equals_numpy_and_sends_no_gradient_to_the_matrix():
  rng = np.random.default_rng(4)
  logits = rng.normal(0.0, 3.0, (64, 5)).astype(np.float32)
  labels = rng.integers(0, 5, 64)
  matrix = rng.dirichlet(np.ones(5), size=5).T.astype(np.float32)  # Columns sum to 1.
  np.testing.assert_allclose(
      losses.forward_corrected_cross_entropy(labels, logits, matrix).numpy(),
      transition.forward_corrected_cross_entropy(labels, logits, matrix), rtol=1e-5)
  variable = tf.Variable(matrix)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(losses.forward_corrected_cross_entropy(labels, logits, variable))
  assert tape.gradient(loss, variable) is None


def _minimise(loss_fn, num_inputs, num_classes, steps=3000):
  logits = tf.Variable(tf.zeros([num_inputs, num_classes]))
  optimizer = tf.keras.optimizers.Adam(0.05)

  @tf.function
  def descend():
    for _ in tf.range(steps):
      optimizer.minimize(lambda: loss_fn(logits), [logits])

  descend()
  return tf.nn.softmax(logits).numpy()


def test_true_matrix_correction_recovers_the_clean_posterior():
  """Free logits per input, population loss under the noisy-label distribution Q p(y|x):
  the corrected loss's minimiser is the clean posterior p(y|x) (FedEFC §3.3, Theorem 1),
  cross-entropy's
  the noisy one."""
  rng = np.random.default_rng(5)
  num_inputs, num_classes = 6, 3
  clean = rng.dirichlet(np.full(num_classes, 0.7), size=num_inputs)  # p(y | x).
  q = np.array([[0.6, 0.3, 0.1], [0.3, 0.6, 0.1], [0.1, 0.1, 0.8]])  # Invertible.
  noisy = clean @ q.T  # p(noisy | x) = Q p(y | x).
  weights = tf.constant(noisy.T.reshape(-1), tf.float32)  # Row i: every input, label i.
  labels = np.repeat(np.arange(num_classes), num_inputs)

  def population(loss):
    return lambda logits: tf.reduce_sum(weights * loss(tf.tile(logits, [num_classes, 1])))

  corrected = _minimise(population(lambda z: losses.forward_corrected_cross_entropy(
      labels, z, q.astype(np.float32))), num_inputs, num_classes)
  plain = _minimise(population(lambda z: losses.cross_entropy(labels, z)), num_inputs,
                    num_classes)
  assert np.abs(corrected - clean).max() < 0.01
  assert np.abs(plain - noisy).max() < 0.01
  assert np.abs(plain - clean).max() > 0.1  # So the correction is what recovers it.
