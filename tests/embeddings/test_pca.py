"""PCA encoder: sklearn PCA, SavedModel round trip through HubEncoder, kNN separation."""

import numpy as np
import pytest
import sklearn.datasets
import sklearn.decomposition

from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import pca as pca_lib
from tff_noisy.ops import knn


def _images():
  return np.random.default_rng(0).integers(0, 256, (120, 6, 6), dtype=np.uint8)


def test_embed_is_sklearn_pca_of_scaled_inputs():
  images = _images()
  encoder = pca_lib.PCAEncoder.fit(images, n_components=5, seed=0)
  flat = images.reshape(120, -1) / 255.0
  expected = sklearn.decomposition.PCA(5, random_state=0).fit(flat).transform(flat)
  np.testing.assert_allclose(encoder.embed(images), expected, atol=1e-4)
  assert encoder.embed(images).dtype == np.float32


def test_sqrt_embed_is_sklearn_pca_of_square_rooted_inputs():
  images = _images()
  encoder = pca_lib.PCAEncoder.fit(images, n_components=5, seed=0, sqrt=True)
  flat = np.sqrt(images.reshape(120, -1) / 255.0)
  expected = sklearn.decomposition.PCA(5, random_state=0).fit(flat).transform(flat)
  np.testing.assert_allclose(encoder.embed(images), expected, atol=1e-4)


def test_sqrt_of_negative_inputs_is_refused():
  with pytest.raises(ValueError, match='inputs >= 0'):
    pca_lib.PCAEncoder.fit(np.full((10, 4), -1.0), n_components=2, sqrt=True)


@pytest.mark.parametrize('sqrt', [False, True])
def test_saved_model_through_hub_equals_in_memory(tmp_path, sqrt):
  images = _images()
  encoder = pca_lib.PCAEncoder.fit(images, n_components=5, sqrt=sqrt)
  path = encoder.save(tmp_path / 'pca')
  loaded = hub_lib.HubEncoder(path, batch_size=50)
  np.testing.assert_allclose(loaded.embed(images), encoder.embed(images), rtol=1e-5, atol=1e-5)


def test_encoder_id_depends_on_the_fit():
  images = _images()
  first = pca_lib.PCAEncoder.fit(images, n_components=5)
  assert first.encoder_id == pca_lib.PCAEncoder.fit(images, n_components=5).encoder_id
  assert first.encoder_id != pca_lib.PCAEncoder.fit(images[:60], n_components=5).encoder_id
  assert first.encoder_id != pca_lib.PCAEncoder.fit(images, n_components=5, sqrt=True).encoder_id


def test_label_free_pca_separates_digits():
  digits = sklearn.datasets.load_digits()
  encoder = pca_lib.PCAEncoder.fit(digits.images, n_components=20)
  assert knn.knn_accuracy(encoder.embed(digits.images), digits.target, k=10) > 0.9
