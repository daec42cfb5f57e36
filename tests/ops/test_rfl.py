"""RFL (Yang et al. 2022): class means, similarity labels, the small-loss selection, the
training labels, the loss, the local centroid update and the server's aggregation by hand,
and the TensorFlow twins against NumPy."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import rfl
from tff_noisy.ops import rfl_tf

LOG3 = np.log(3.0)


def test_class_means_by_hand_with_zero_for_an_absent_class():
  features = [[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]]
  np.testing.assert_allclose(rfl.class_means(features, [0, 0, 1], 3),
                             [[2.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
  np.testing.assert_allclose(rfl.class_means(features, [0, 0, 1], 3, mask=[True, False, True]),
                             [[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])


def test_similarity_labels_by_hand_and_scale_free():
  # Centroids e_0, e_1: (2, 1) is nearer e_0 (cos 2/√5 > 1/√5), (1, 3) nearer e_1, and
  # (-1, 1/2) has cos < 0 with e_0 and > 0 with e_1.
  centroids = [[1.0, 0.0], [0.0, 1.0]]
  features = np.array([[2.0, 1.0], [1.0, 3.0], [-1.0, 0.5]])
  np.testing.assert_array_equal(rfl.similarity_labels(features, centroids), [0, 1, 1])
  np.testing.assert_array_equal(rfl.similarity_labels(7.0 * features, centroids), [0, 1, 1])


def test_small_loss_selection_by_hand():
  # Label 0 under logits (0, -a): CE = log(1 + e^{-a}), smaller for a larger a.
  a = np.array([1.0, 3.0, 0.0, 2.0, 0.5])
  logits = np.stack([np.zeros(5), -a], axis=1)
  # τ = 0.4: ⌊0.6 * 5⌋ = 3 kept, the largest a: positions 1, 3, 0.
  np.testing.assert_array_equal(rfl.selected_mask(logits, np.zeros(5, int), 0.4),
                                [True, True, False, True, False])
  assert rfl.selected_mask(logits, np.zeros(5, int), 0.0).all()


def test_agreement_and_training_labels_by_hand():
  centroids = [[1.0, 0.0], [0.0, 1.0]]
  features = [[2.0, 1.0], [3.0, 1.0], [0.0, 1.0]]  # Similarity labels (0, 0, 1).
  agree = rfl.agreement_mask(features, [0, 1, 1], centroids, [True, True, False])
  np.testing.assert_array_equal(agree, [True, False, False])
  # Before T_pl every example keeps its label; from T_pl the disagreeing take ŷ.
  np.testing.assert_array_equal(rfl.training_labels([0, 1, 1], [1, 0, 0], agree, 9, 10),
                                [0, 1, 1])
  np.testing.assert_array_equal(rfl.training_labels([0, 1, 1], [1, 0, 0], agree, 10, 10),
                                [0, 0, 0])


def test_lambda_cen_ramps_to_t_pl():
  weights = [rfl.lambda_cen_weight(t, 1.0, 10) for t in (0, 5, 9, 10, 30)]
  np.testing.assert_allclose(weights, [0.0, 0.5, 0.9, 1.0, 1.0])


def _batch():
  logits = np.array([[0.0, 0.0], [0.0, LOG3], [5.0, -5.0]])
  features = np.array([[2.0, 1.0], [3.0, 1.0], [9.0, 9.0]])
  return logits, features


def test_loss_by_hand():
  # Selected rows 0 and 1 (row 2 left out); row 0 agrees. Targets (0, 1, 0).
  # CE: row 0 p = (1/2, 1/2) -> log 2; row 1 p = (1/4, 3/4) -> log(4/3): L_c = (1/2) log(8/3).
  # H: row 0 log 2; row 1 (1/4) log 4 + (3/4) log(4/3) = 2 log 2 - (3/4) log 3.
  # Centroid term, row 0 only: ‖(2, 1) - (1, 0)‖² = 2.
  logits, features = _batch()
  centroids = [[1.0, 0.0], [0.0, 1.0]]
  selected, agree = [True, True, False], [True, False, False]
  h1 = 2 * np.log(2) - 0.75 * LOG3
  want = 0.5 * np.log(8 / 3) + 0.5 * 2.0 + 0.8 * (np.log(2) + h1) / 2
  got = rfl.rfl_loss(logits, features, [0, 1, 0], [0, 1, 0], centroids, selected, agree,
                     lambda_cen=0.5, lambda_e=0.8)
  assert got == pytest.approx(want)
  # Per example (B = 3, n = 2): 3/2 (CE + 0.8 H) for the selected, + 3 * 0.5 * 2 on row 0.
  per = rfl.per_example_loss(logits, features, [0, 1, 0], [0, 1, 0], centroids, selected,
                             agree, 0.5, 0.8)
  np.testing.assert_allclose(per, [1.5 * (np.log(2) + 0.8 * np.log(2)) + 3.0,
                                   1.5 * (np.log(4 / 3) + 0.8 * h1), 0.0])
  assert per.mean() == pytest.approx(want)


def test_centroid_update_by_hand():
  # (1, 0) toward (1, 1): s² = 1/2 -> (1, 1/2); toward (2, 0): s² = 1 -> (2, 0); toward
  # an orthogonal (0, 3) or an absent class (0, 0): unchanged.
  centroids = [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]
  means = [[1.0, 1.0], [2.0, 0.0], [0.0, 3.0], [0.0, 0.0]]
  np.testing.assert_allclose(rfl.update_centroids(centroids, means),
                             [[1.0, 0.5], [2.0, 0.0], [1.0, 0.0], [1.0, 0.0]])


def test_server_aggregation_by_hand():
  # f_G^0 = (1, 0); clients (2, 0) (cos 1) and (1, 1) (cos 1/√2):
  # ((2, 0) + (1, 1)/√2) / (1 + 1/√2).
  r = 1 / np.sqrt(2)
  global_centroids = [[1.0, 0.0]]
  local = [[[2.0, 0.0]], [[1.0, 1.0]]]
  np.testing.assert_allclose(rfl.aggregate_centroids(global_centroids, local),
                             [[(2 + r) / (1 + r), r / (1 + r)]])
  # Count-weighted (3 and 1 examples): (3 (2, 0) + (1, 1)) / 4; no examples: the old f_G.
  np.testing.assert_allclose(rfl.aggregate_centroids(global_centroids, local, [[3], [1]]),
                             [[7 / 4, 1 / 4]])
  np.testing.assert_allclose(rfl.aggregate_centroids(global_centroids, local, [[0], [0]]),
                             global_centroids)
  # Similarities summing to 0 ((0, 1) and (0, -1) against (1, 0)): the plain mean.
  np.testing.assert_allclose(rfl.aggregate_centroids([[1.0, 0.0]], [[[0.0, 1.0]], [[0.0, -1.0]]]),
                             [[0.0, 0.0]], atol=1e-12)


def test_the_tensorflow_twins_equal_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(8, 3)).astype(np.float32)
  features = rng.normal(size=(8, 4)).astype(np.float32)
  labels = rng.integers(0, 3, 8)
  pseudo = rng.integers(0, 3, 8)
  centroids = rng.normal(size=(3, 4)).astype(np.float32)
  np.testing.assert_array_equal(rfl_tf.similarity_labels(features, centroids),
                                rfl.similarity_labels(features, centroids))
  selected = rfl.selected_mask(logits, labels, 0.3)
  np.testing.assert_array_equal(rfl_tf.selected_mask(logits, labels, 0.3), selected)
  agree = rfl.agreement_mask(features, labels, centroids, selected)
  np.testing.assert_array_equal(rfl_tf.agreement_mask(features, labels, centroids, selected),
                                agree)
  for t in (3, 12):
    np.testing.assert_array_equal(
        rfl_tf.training_labels(labels, pseudo, tf.cast(agree, tf.float32), t >= 10),
        rfl.training_labels(labels, pseudo, agree, t, 10))
    assert float(rfl_tf.lambda_cen_weight(t, 1.0, 10)) == pytest.approx(
        rfl.lambda_cen_weight(t, 1.0, 10))
  targets = rfl.training_labels(labels, pseudo, agree, 12, 10)
  np.testing.assert_allclose(
      rfl_tf.per_example_loss(logits, tf.constant(features), labels, targets, centroids,
                              selected, agree, 0.7, 0.8),
      rfl.per_example_loss(logits, features, labels, targets, centroids, selected, agree,
                           0.7, 0.8), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(rfl_tf.class_means(tf.constant(features), labels, 3, selected),
                             rfl.class_means(features, labels, 3, selected), rtol=1e-6,
                             atol=1e-7)
  np.testing.assert_allclose(
      rfl_tf.update_centroids(tf.constant(centroids), tf.constant(features), labels,
                              selected.astype(np.float32), 3),
      rfl.update_centroids(centroids, rfl.class_means(features, labels, 3, selected)),
      rtol=1e-5, atol=1e-6)


def test_the_centroid_term_moves_the_features_only_when_asked():
  logits, features = _batch()
  args = ([0, 1, 0], [0, 1, 0], [[1.0, 0.0], [0.0, 1.0]], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0],
          0.5, 0.8)
  h = tf.Variable(features.astype(np.float32))
  with tf.GradientTape(persistent=True) as tape:
    detached = tf.reduce_mean(rfl_tf.per_example_loss(logits.astype(np.float32), h, *args))
    through = tf.reduce_mean(rfl_tf.per_example_loss(logits.astype(np.float32), h, *args,
                                                     centroid_gradient=True))
  assert tape.gradient(detached, h) is None
  # d/dh_0 of λ_cen ‖h_0 - (1, 0)‖² = 2 * 0.5 * (1, 1) = (1, 1); other rows 0.
  np.testing.assert_allclose(tape.gradient(through, h), [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
