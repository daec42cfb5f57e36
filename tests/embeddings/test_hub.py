"""HubEncoder on a local SavedModel, the embedding cache, and load errors."""

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.embeddings import hub as hub_lib


class _ChannelMeans(tf.Module):
  """A tiny encoder: scale * per-channel mean of a [None, 8, 8, 3] batch."""

  def __init__(self, scale):
    super().__init__()
    self.scale = tf.Variable(scale)

  @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32)])
  def __call__(self, x):
    return self.scale * tf.reduce_mean(x, axis=[1, 2])


def _save(path, scale=2.0):
  tf.saved_model.save(_ChannelMeans(scale), str(path))
  return path


@pytest.fixture
def encoder(tmp_path):
  return hub_lib.HubEncoder(_save(tmp_path / 'model'), input_size=(8, 8), channels=3,
                            batch_size=3)


def _gray_images():
  """Seven constant 4x4 grayscale uint8 images."""
  values = np.array([0, 17, 51, 85, 128, 200, 255], dtype=np.uint8)
  return np.broadcast_to(values[:, None, None], (7, 4, 4)).copy(), values


def test_embeds_grayscale_through_tiling_resizing_and_scaling(encoder):
  images, values = _gray_images()
  embeddings = encoder.embed(images)
  assert embeddings.shape == (7, 3) and embeddings.dtype == np.float32
  np.testing.assert_allclose(embeddings, np.repeat(2.0 * values[:, None] / 255.0, 3, 1),
                             rtol=1e-6)
  np.testing.assert_allclose(encoder.embed(images[..., None]), embeddings)


def test_preprocess_output_shape(encoder):
  assert encoder.preprocess(np.zeros((2, 4, 5), np.uint8)).shape == (2, 8, 8, 3)
  with pytest.raises(ValueError, match='2-channel'):
    encoder.preprocess(np.zeros((2, 4, 4, 2), np.float32))


def test_encoder_id_follows_the_model_and_options(tmp_path):
  path = _save(tmp_path / 'model')
  first = hub_lib.HubEncoder(path, input_size=(8, 8), channels=3).encoder_id
  assert hub_lib.HubEncoder(path, input_size=(8, 8), channels=3).encoder_id == first
  assert hub_lib.HubEncoder(path, input_size=(8, 8), channels=3, output_key=None,
                            batch_size=1).encoder_id == first
  _save(path, scale=3.0)  # Same directory, other weights.
  assert hub_lib.HubEncoder(path, input_size=(8, 8), channels=3).encoder_id != first


def test_cache_computes_once(encoder, tmp_path, monkeypatch):
  images, _ = _gray_images()
  cache = tmp_path / 'cache'
  first = hub_lib.embed_cached(encoder, images, cache, key='gray')
  [path] = cache.glob('gray-*.npy')

  def fail(x):
    raise AssertionError('recomputed a cached embedding')

  monkeypatch.setattr(encoder, 'embed', fail)
  np.testing.assert_array_equal(hub_lib.embed_cached(encoder, images, cache, key='gray'), first)
  monkeypatch.undo()
  hub_lib.embed_cached(encoder, images[:3], cache, key='gray')  # Other data: a new entry.
  assert len(list(cache.glob('gray-*.npy'))) == 2 and path.exists()
  assert not list(cache.glob('*.partial'))


def test_bad_path_raises_encoder_load_error(tmp_path):
  missing = tmp_path / 'no-such-model'
  with pytest.raises(hub_lib.EncoderLoadError, match='no-such-model'):
    hub_lib.HubEncoder(missing)


def test_url_error_suggests_offline_encoders(tmp_path, monkeypatch):
  monkeypatch.setenv('TFHUB_CACHE_DIR', str(tmp_path / 'hub-cache'))
  url = 'https://tfhub.dev/tff-noisy/no-such-encoder/1'
  with pytest.raises(hub_lib.EncoderLoadError, match='network') as error:
    hub_lib.HubEncoder(url)
  assert url in str(error.value) and 'offline' in str(error.value)
