"""SimCLR pretraining: NT-Xent against NumPy, seeded training, SavedModel round trip."""

import numpy as np
import pytest
import sklearn.datasets
import tensorflow as tf

from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import pretrain


def _digits(n=64):
  return (sklearn.datasets.load_digits().images[:n] / 16.0).astype(np.float32)[..., None]


def _nt_xent_reference(z1, z2, temperature):
  """SimCLR Eq. 1, one anchor at a time."""
  z = np.concatenate([z1, z2])
  z /= np.linalg.norm(z, axis=1, keepdims=True)
  n = len(z1)
  losses = []
  for i in range(2 * n):
    similarity = z @ z[i] / temperature
    positive = (i + n) % (2 * n)
    others = np.exp(np.delete(similarity, i)).sum()
    losses.append(-np.log(np.exp(similarity[positive]) / others))
  return np.mean(losses)


def test_nt_xent_matches_numpy_reference():
  rng = np.random.default_rng(0)
  z1, z2 = rng.normal(size=(2, 5, 3))
  loss = pretrain.nt_xent_loss(tf.constant(z1, tf.float32), tf.constant(z2, tf.float32), 0.5)
  np.testing.assert_allclose(loss.numpy(), _nt_xent_reference(z1, z2, 0.5), rtol=1e-5)


def test_nt_xent_is_low_for_matching_views():
  z = np.eye(4, dtype=np.float32)
  matched = pretrain.nt_xent_loss(z, z, 0.1)
  shuffled = pretrain.nt_xent_loss(z, z[::-1], 0.1)
  assert matched < 0.01 < shuffled


def test_augment_keeps_shape_and_range():
  views = pretrain.augment(tf.constant(_digits(8)), tf.random.Generator.from_seed(0), flip=True)
  assert views.shape == (8, 8, 8, 1)
  assert 0.0 <= float(tf.reduce_min(views)) <= float(tf.reduce_max(views)) <= 1.0


def _pretrain(seed):
  return pretrain.pretrain(_digits(), flip=False, epochs=1, batch_size=32, width=4, seed=seed)


@pytest.fixture(scope='module')
def encoder():
  return _pretrain(seed=0)


@pytest.mark.slow
def test_pretraining_is_seeded(encoder):
  first = encoder(_digits(), training=False).numpy()
  assert first.shape == (64, 16)
  np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(_pretrain(0)(_digits(), training=False), first, atol=1e-6)
  assert not np.allclose(_pretrain(1)(_digits(), training=False), first)


def test_saved_model_through_hub_equals_in_memory(encoder, tmp_path):
  images = _digits()
  path = pretrain.save_encoder(encoder, tmp_path / 'simclr', images.shape[1:])
  loaded = hub_lib.HubEncoder(path, batch_size=20)
  np.testing.assert_allclose(loaded.embed(images), encoder(images, training=False).numpy(),
                             rtol=1e-5, atol=1e-5)
