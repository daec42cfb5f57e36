"""PCA of raw inputs: the offline, label-free stand-in for CLIP in NNC (docs/papers/fedln.md).

:class:`PCAEncoder` is fitted on the unlabelled training inputs and embeds with
(t(x) - mean) @ components^T, where t is the identity or, with ``sqrt=True``, the
element-wise square root: Euclidean distance between square-rooted intensities is the
Hellinger distance, which damps the large-intensity differences that dominate raw pixel
distances (Hellinger PCA, Lebret & Collobert 2014). :meth:`PCAEncoder.save` writes it as
a SavedModel that :class:`tff_noisy.embeddings.hub.HubEncoder` loads like any TF-Hub
encoder, so the pretrained-encoder path is exercised without a network.
"""

import hashlib
import os

import numpy as np
import sklearn.decomposition
import tensorflow as tf

from tff_noisy.embeddings import hub as hub_lib


class NegativeInputsError(ValueError):
  """Square-rooted PCA was asked to embed inputs with negative values."""


class _PCAModule(tf.Module):
  """A reusable SavedModel: ``__call__`` maps a float32 batch to its PCA embedding."""

  def __init__(self, mean, components, sqrt):
    super().__init__()
    self.mean = tf.Variable(mean, trainable=False)
    self.projection = tf.Variable(components.T, trainable=False)
    self.sqrt = sqrt

  @tf.function
  def __call__(self, x):
    x = tf.reshape(x, [tf.shape(x)[0], -1])
    if self.sqrt:
      x = tf.sqrt(x)
    return tf.matmul(x - self.mean, self.projection)


class PCAEncoder:
  """(t(x) - mean) @ components^T on flattened float inputs (uint8 scaled to [0, 1]).

  t is the square root if ``sqrt`` (inputs must then be >= 0), else the identity.
  """

  def __init__(self, mean, components, input_shape, sqrt: bool = False):
    self.mean = np.asarray(mean, dtype=np.float32)
    self.components = np.asarray(components, dtype=np.float32)  # [K, D]
    self.input_shape = tuple(input_shape)
    self.sqrt = bool(sqrt)
    digest = hashlib.sha256(repr((self.input_shape, self.sqrt)).encode())
    digest.update(self.mean.tobytes())
    digest.update(self.components.tobytes())
    self.encoder_id = 'pca-' + digest.hexdigest()

  @classmethod
  def fit(cls, x, n_components: int = 50, seed: int = 0, sqrt: bool = False) -> 'PCAEncoder':
    """Fits on inputs x [N, ...] (no labels): sklearn PCA with random_state=seed."""
    shape = np.shape(x)[1:]
    pca = sklearn.decomposition.PCA(n_components=n_components, random_state=seed)
    pca.fit(_transformed(x, sqrt))
    return cls(pca.mean_, pca.components_, shape, sqrt)

  def embed(self, x) -> np.ndarray:
    """Embeddings [N, K] float32."""
    return (_transformed(x, self.sqrt) - self.mean) @ self.components.T

  def save(self, path) -> str:
    """Writes a SavedModel loadable with ``HubEncoder(path)``; returns the path."""
    path = os.fspath(path)
    module = _PCAModule(self.mean, self.components, self.sqrt)
    module.__call__.get_concrete_function(tf.TensorSpec([None, *self.input_shape], tf.float32))
    tf.saved_model.save(module, path)
    return path


def _transformed(x, sqrt: bool) -> np.ndarray:
  """Flattened float inputs [N, D], square-rooted if ``sqrt``."""
  x = hub_lib.as_float_inputs(x)
  x = x.reshape(len(x), -1)
  if sqrt:
    if x.size and x.min() < 0:
      raise NegativeInputsError(f'needs inputs >= 0 (images), got a minimum of {x.min():g}')
    x = np.sqrt(x)
  return x
