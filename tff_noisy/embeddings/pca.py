"""PCA of raw inputs: the offline, label-free stand-in for CLIP in NNC (fedln.md §8).

:class:`PCAEncoder` is fitted on the unlabelled training inputs and embeds with
(x - mean) @ components^T. :meth:`PCAEncoder.save` writes it as a SavedModel that
:class:`tff_noisy.embeddings.hub.HubEncoder` loads like any TF-Hub encoder, so the
pretrained-encoder path is exercised without a network.
"""

import hashlib
import os

import numpy as np
import sklearn.decomposition
import tensorflow as tf

from tff_noisy.embeddings import hub as hub_lib


class _PCAModule(tf.Module):
  """A reusable SavedModel: ``__call__`` maps a float32 batch to its PCA embedding."""

  def __init__(self, mean, components):
    super().__init__()
    self.mean = tf.Variable(mean, trainable=False)
    self.projection = tf.Variable(components.T, trainable=False)

  @tf.function
  def __call__(self, x):
    return tf.matmul(tf.reshape(x, [tf.shape(x)[0], -1]) - self.mean, self.projection)


class PCAEncoder:
  """(x - mean) @ components^T on flattened float inputs (uint8 scaled to [0, 1])."""

  def __init__(self, mean, components, input_shape):
    self.mean = np.asarray(mean, dtype=np.float32)
    self.components = np.asarray(components, dtype=np.float32)  # [K, D]
    self.input_shape = tuple(input_shape)
    digest = hashlib.sha256(repr(self.input_shape).encode())
    digest.update(self.mean.tobytes())
    digest.update(self.components.tobytes())
    self.encoder_id = 'pca-' + digest.hexdigest()

  @classmethod
  def fit(cls, x, n_components: int = 50, seed: int = 0) -> 'PCAEncoder':
    """Fits on inputs x [N, ...] (no labels): sklearn PCA with random_state=seed."""
    x = hub_lib.as_float_inputs(x)
    pca = sklearn.decomposition.PCA(n_components=n_components, random_state=seed)
    pca.fit(x.reshape(len(x), -1))
    return cls(pca.mean_, pca.components_, x.shape[1:])

  def embed(self, x) -> np.ndarray:
    """Embeddings [N, K] float32."""
    x = hub_lib.as_float_inputs(x)
    return (x.reshape(len(x), -1) - self.mean) @ self.components.T

  def save(self, path) -> str:
    """Writes a SavedModel loadable with ``HubEncoder(path)``; returns the path."""
    path = os.fspath(path)
    module = _PCAModule(self.mean, self.components)
    module.__call__.get_concrete_function(tf.TensorSpec([None, *self.input_shape], tf.float32))
    tf.saved_model.save(module, path)
    return path
