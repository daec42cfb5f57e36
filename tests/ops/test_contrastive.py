"""LSC's K-similarity contrastive term: NumPy against a direct computation, the TF twin."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import contrastive
from tff_noisy.ops import contrastive_tf


def _direct(features, embeddings, k, temperature, exclude_self=True):
  """The paper's Eq. 2, one example and one pair at a time."""
  m = len(features)
  unit = lambda v: np.asarray(v, np.float64) / np.linalg.norm(v)
  zs = [unit(e) for e in embeddings]
  zc = [unit(f) for f in features]
  out = []
  for j in range(m):
    distances = [(np.linalg.norm(zs[j] - zs[l]), l) for l in range(m) if l != j]
    neighbours = [l for _, l in sorted(distances)[:min(k, m - 1)]]
    s = [float(zc[j] @ zc[l]) / temperature for l in range(m)]
    numerator = sum(math.exp(s[l]) for l in neighbours)
    denominator = sum(math.exp(s[l]) for l in range(m) if l != j or not exclude_self)
    out.append(-math.log(numerator / denominator))
  return np.array(out)


def _batch(seed, m=7, d=5, e=3):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(m, d)), rng.normal(size=(m, e))


@pytest.mark.parametrize('k', [1, 2, 4])
@pytest.mark.parametrize('exclude_self', [True, False])
def test_loss_equals_the_direct_computation(k, exclude_self):
  features, embeddings = _batch(k)
  np.testing.assert_allclose(
      contrastive.k_similarity_loss(features, embeddings, k, 0.3, exclude_self),
      _direct(features, embeddings, k, 0.3, exclude_self), rtol=1e-10)


def test_k_at_least_the_batch_size_makes_every_other_example_a_positive():
  features, embeddings = _batch(1, m=5)
  clipped = contrastive.k_similarity_loss(features, embeddings, 4, 0.5)
  np.testing.assert_allclose(contrastive.k_similarity_loss(features, embeddings, 9, 0.5),
                             clipped)
  np.testing.assert_allclose(clipped, 0.0, atol=1e-12)  # Numerator = denominator.
  assert contrastive.neighbour_mask(embeddings, 9).sum(axis=1).tolist() == [4] * 5
  assert contrastive.k_similarity_loss(features[:1], embeddings[:1], 4, 0.5).tolist() == [0.0]


def test_neighbours_exclude_self_and_follow_the_embeddings():
  embeddings = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
  mask = contrastive.neighbour_mask(embeddings * [[1], [5], [2], [0.1]], 1)  # Scale-free.
  np.testing.assert_array_equal(np.argmax(mask, axis=1), [1, 0, 3, 2])
  assert not mask.diagonal().any()
  labels = np.array([0, 0, 1, 0])
  assert contrastive.neighbour_purity(embeddings, labels, 1) == (2, 4)


def test_loss_is_lower_when_neighbours_share_features():
  rng = np.random.default_rng(3)
  groups = np.repeat(np.arange(4), 5)
  centres = rng.normal(size=(4, 16))
  embeddings = centres[groups] + 0.1 * rng.normal(size=(20, 16))
  aligned = 3 * centres[groups] + 0.1 * rng.normal(size=(20, 16))  # Neighbours alike.
  unrelated = rng.normal(size=(20, 16))
  shuffled = aligned[rng.permutation(20)]
  loss = lambda f: contrastive.k_similarity_loss(f, embeddings, 4, 0.3).mean()
  assert loss(aligned) < loss(unrelated) - 1.0
  assert loss(aligned) < loss(shuffled) - 1.0


@pytest.mark.parametrize('m, k, exclude_self', [(12, 4, True), (12, 4, False), (3, 4, True),
                                                (1, 4, True), (0, 4, True)])
def test_tf_twin_equals_numpy(m, k, exclude_self):
  features, embeddings = _batch(m + k, m=m, d=8, e=6)
  expected = contrastive.k_similarity_loss(features, embeddings, k, 0.3, exclude_self)
  got = contrastive_tf.k_similarity_loss(features.astype(np.float32),
                                         embeddings.astype(np.float32), k, 0.3, exclude_self)
  assert got.shape == (m,)
  np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_tf_twin_with_an_unknown_batch_size_and_the_gradients():
  features, embeddings = (tf.constant(v, tf.float32) for v in _batch(7, m=9, d=4, e=3))
  twin = tf.function(contrastive_tf.k_similarity_loss, input_signature=[
      tf.TensorSpec([None, 4]), tf.TensorSpec([None, 3]), tf.TensorSpec([], tf.int32),
      tf.TensorSpec([], tf.float32)])
  np.testing.assert_allclose(
      twin(features, embeddings, 4, 0.3).numpy(),
      contrastive.k_similarity_loss(features.numpy(), embeddings.numpy(), 4, 0.3),
      rtol=1e-5)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([features, embeddings])
    loss = tf.reduce_sum(contrastive_tf.k_similarity_loss(features, embeddings, 4, 0.3))
  assert tape.gradient(loss, embeddings) is None  # Neighbours are constants of the step.
  grad = tape.gradient(loss, features).numpy()
  assert np.all(np.isfinite(grad)) and np.abs(grad).sum() > 0


def test_tf_twin_adds_nothing_to_the_gradient_of_a_batch_of_one():
  features, embeddings = (tf.constant(v, tf.float32) for v in _batch(8, m=1, d=4, e=3))

  @tf.function
  def gradient(features):
    with tf.GradientTape() as tape:
      tape.watch(features)
      loss = tf.reduce_sum(features) + tf.reduce_sum(
          contrastive_tf.k_similarity_loss(features, embeddings, 4, 0.3))
    return tape.gradient(loss, features)

  np.testing.assert_array_equal(gradient(features).numpy(), 1.0)
