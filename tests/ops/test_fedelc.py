"""FedELC (Jiang et al. 2024): its PENCIL loss and label gradient by hand and against the
released code's batch reductions, the TensorFlow loss it reuses against NumPy, the
once-per-epoch label step against a step after each batch, and the round's weights."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import fedelc
from tff_noisy.ops import label_distribution
from tff_noisy.ops import label_distribution_tf

# Two classes: z = (0, log 3), p = (1/4, 3/4); ỹ = (0, 0), y^d = (1/2, 1/2); ŷ = 0.
LOGITS = np.array([[0.0, np.log(3.0)]])
LABEL_LOGITS = np.zeros((1, 2))


def test_the_loss_by_hand():
  # KL(p ‖ y^d) = (1/4) log(1/2) + (3/4) log(3/2) = (3/4) log 3 − log 2;
  # −log y^d_0 = log 2; H(p) = log 4 − (3/4) log 3. C = 2, α = 0.5, β = 0.2.
  kl = 0.75 * np.log(3) - np.log(2)
  entropy = np.log(4) - 0.75 * np.log(3)
  want = kl / 2 + 0.5 * np.log(2) + 0.2 * entropy / 2
  np.testing.assert_allclose(fedelc.fedelc_loss(LOGITS, LABEL_LOGITS, [0]), [want])
  # No mask: an example the model gets wrong keeps its compatibility term.
  wrong = fedelc.fedelc_loss(LOGITS, LABEL_LOGITS, [0], beta=0.0)
  np.testing.assert_allclose(wrong, [kl / 2 + 0.5 * np.log(2)])


def test_the_label_gradient_by_hand():
  # ((y^d − p)/C + α (y^d − e_0)) / |B| = ((1/4, −1/4)/2 + (−1/4, 1/4)) = (−1/8, 1/8).
  np.testing.assert_allclose(fedelc.label_gradient(LOGITS, LABEL_LOGITS, [0]),
                             [[-0.125, 0.125]])


def test_the_batch_mean_is_the_released_pencil_loss():
  """The code: L_o = −mean log y^d_ŷ, L_e = −mean Σ p log p,
  L_c = −mean Σ p log y^d − L_e, loss = L_c / C + α L_o + β L_e / C."""
  rng = np.random.default_rng(0)
  z, y_tilde = rng.normal(size=(6, 4)), rng.normal(scale=4.0, size=(6, 4))
  labels = rng.integers(0, 4, 6)
  log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
  log_yd = y_tilde - np.log(np.exp(y_tilde).sum(1, keepdims=True))
  p = np.exp(log_p)
  l_o = -np.mean(log_yd[np.arange(6), labels])
  l_e = -np.mean(np.sum(log_p * p, 1))
  l_c = -np.mean(np.sum(log_yd * p, 1)) - l_e
  want = l_c / 4 + 0.5 * l_o + 0.2 * l_e / 4
  assert fedelc.fedelc_loss(z, y_tilde, labels).mean() == pytest.approx(want, rel=1e-12)


def test_the_tensorflow_loss_and_its_gradient_equal_numpy():
  rng = np.random.default_rng(1)
  z = rng.normal(size=(5, 3)).astype(np.float32)
  y_tilde = (10 * np.eye(3)[rng.integers(0, 3, 5)] + rng.normal(size=(5, 3))).astype(np.float32)
  labels = rng.integers(0, 3, 5)
  rows = tf.Variable(y_tilde)
  with tf.GradientTape() as tape:
    loss = label_distribution_tf.label_distribution_loss(labels, tf.constant(z), rows,
                                                         **fedelc.loss_args())
    mean = tf.reduce_mean(loss)
  np.testing.assert_allclose(loss, fedelc.fedelc_loss(z, y_tilde, labels), rtol=1e-5)
  np.testing.assert_allclose(tape.gradient(mean, rows),
                             fedelc.label_gradient(z, y_tilde, labels), rtol=1e-4, atol=1e-7)


def test_a_step_per_epoch_equals_a_step_per_batch():
  """7 examples in shuffled batches of 3, the last (one example) dropped: the code's
  epoch-end step ỹ − λ G equals stepping each batch's rows right after the batch,
  since no row is seen twice in an epoch. The model's logits are held fixed."""
  rng = np.random.default_rng(2)
  n, c, lr = 7, 3, 1000.0
  labels = rng.integers(0, c, n)
  y_tilde = label_distribution.initial_label_logits(labels, c).astype(np.float64)
  logits = rng.normal(size=(n, c))
  order = rng.permutation(n)
  batches = [order[0:3], order[3:6]]  # order[6] is the dropped last batch.
  per_batch = y_tilde.copy()
  grads = []
  for rows in batches:
    g = fedelc.label_gradient(logits[rows], per_batch[rows], labels[rows])
    grads.append(g)
    per_batch[rows] = per_batch[rows] - lr * g
  per_epoch = y_tilde - lr * fedelc.epoch_gradient(n, c, batches, grads)
  np.testing.assert_allclose(per_epoch, per_batch)
  np.testing.assert_array_equal(per_epoch[order[6]], y_tilde[order[6]])
  assert not np.allclose(per_epoch[order[0]], y_tilde[order[0]])


def test_epoch_gradient_keeps_the_later_batch_of_a_row():
  g = fedelc.epoch_gradient(3, 2, [[0, 1], [1, 2]],
                            [np.array([[1.0, 1.0], [2.0, 2.0]]),
                             np.array([[3.0, 3.0], [4.0, 4.0]])])
  np.testing.assert_array_equal(g, [[1, 1], [3, 3], [4, 4]])


def test_the_merge_after_training_by_hand():
  # K (P + softmax(ỹ)) / 2 = 10 ((1/4, 3/4) + (1/2, 1/2)) / 2 = (3.75, 6.25).
  np.testing.assert_allclose(
      label_distribution.merge_label_logits(LABEL_LOGITS, [[0.25, 0.75]], fedelc.LABEL_SCALE),
      [[3.75, 6.25]])


def test_the_rounds_weights_by_hand():
  sizes, noisy = [1, 1, 2], [False, True, True]
  updates = [[np.array([0.0])], [np.array([3.0])], [np.array([1.0])]]
  before = fedelc.aggregation_weights(sizes, noisy, updates, detected=False)
  np.testing.assert_allclose(before.weights, [0.25, 0.25, 0.5])
  assert before.status == fedelc.BEFORE_DETECTION
  # After detection: d = (0, 3, 1), D = d / 3; weights ∝ n_k exp(−D_k).
  after = fedelc.aggregation_weights(sizes, noisy, updates, detected=True)
  raw = np.array([1.0, np.exp(-1.0), 2 * np.exp(-1 / 3)])
  np.testing.assert_allclose(after.weights, raw / raw.sum())
  np.testing.assert_allclose(after.distances, [0.0, 1.0, 1 / 3])
  # A round of noisy clients only weighs by examples (the code's FedAvg fallback).
  all_noisy = fedelc.aggregation_weights(sizes, [True] * 3, updates, detected=True)
  np.testing.assert_allclose(all_noisy.weights, [0.25, 0.25, 0.5])
