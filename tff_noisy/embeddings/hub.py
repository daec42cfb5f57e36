"""Frozen pretrained encoders through ``tensorflow_hub.KerasLayer``, with a disk cache.

FedLN's NNC embeds each client's samples once with a pretrained encoder g (CLIP ViT-B/32
for images, TRILLsson for audio; FedLN §2). :class:`HubEncoder` loads any
TF-Hub/Kaggle handle or local SavedModel directory, and resizes and normalises inputs to
the shape the encoder expects. :func:`embed_cached` computes an encoder's embeddings of
a dataset once and keeps them on disk.

Encoders are duck-typed: anything with ``encoder_id`` (a string that changes whenever
the embeddings would) and ``embed(x) -> [N, D] float32`` works, e.g.
:class:`tff_noisy.embeddings.pca.PCAEncoder`.
"""

import hashlib
import json
import os
import pathlib
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_hub as hub


class EncoderLoadError(RuntimeError):
  """A TF-Hub handle or SavedModel directory could not be loaded."""


def as_float_inputs(x) -> np.ndarray:
  """float32 inputs; uint8 images are scaled to [0, 1], TF-Hub's image convention."""
  x = np.asarray(x)
  if x.dtype == np.uint8:
    return x.astype(np.float32) / 255.0
  return x.astype(np.float32)


def _fingerprint(handle: str) -> str:
  """The handle, plus a hash of the graph and variable index of a local SavedModel."""
  path = pathlib.Path(handle)
  digest = hashlib.sha256(handle.encode())
  for name in ('saved_model.pb', 'variables/variables.index'):
    if (path / name).is_file():
      digest.update((path / name).read_bytes())
  return digest.hexdigest()


class HubEncoder:
  """Embeds inputs with ``hub.KerasLayer(handle)``, frozen.

  Args:
    handle: a TF-Hub or Kaggle URL, or a local SavedModel directory whose object is
      callable on a float32 batch (a "reusable SavedModel").
    input_size: (height, width) the encoder expects; images of another size are
      resized (bilinear). None: inputs pass at their own size.
    channels: channels the encoder expects; grayscale images are tiled to 3 channels.
      [N, H, W] inputs get a channel axis when ``input_size`` or ``channels`` is set.
    batch_size: examples per forward pass.
    output_key: key of the output to use when the model returns a dict.

  Raises:
    EncoderLoadError: the handle cannot be loaded.
  """

  def __init__(self, handle, input_size: Optional[Sequence[int]] = None,
               channels: Optional[int] = None, batch_size: int = 256,
               output_key: Optional[str] = None):
    self.handle = os.fspath(handle)
    self.input_size = tuple(input_size) if input_size else None
    self.channels = channels
    self.batch_size = batch_size
    try:
      self._layer = hub.KerasLayer(self.handle, trainable=False, output_key=output_key)
    except Exception as e:  # Hub raises OSError, URLError, ValueError, tf.errors...
      message = f'cannot load encoder {self.handle!r}: {e}'
      if self.handle.startswith(('http://', 'https://')):
        message += ('. This machine may have no network access: use an offline encoder, '
                    'e.g. a local SavedModel directory or the PCA encoder of '
                    'tff_noisy.embeddings.pca (PCAEncoder.fit(...).save(dir))')
      raise EncoderLoadError(message) from e
    self.encoder_id = hashlib.sha256(json.dumps([
        _fingerprint(self.handle), self.input_size, channels, output_key]).encode()).hexdigest()

  def preprocess(self, x) -> tf.Tensor:
    """float32, a channel axis, grayscale -> RGB tiling and resizing, as configured."""
    x = tf.convert_to_tensor(as_float_inputs(x))
    if not (self.input_size or self.channels):
      return x
    if x.shape.rank == 3:
      x = tf.expand_dims(x, -1)
    if self.channels and x.shape[-1] != self.channels:
      if x.shape[-1] != 1:
        raise ValueError(f'cannot turn {x.shape[-1]}-channel inputs into {self.channels}')
      x = tf.tile(x, [1, 1, 1, self.channels])
    if self.input_size and tuple(x.shape[1:3]) != self.input_size:
      x = tf.image.resize(x, self.input_size)
    return x

  def embed(self, x) -> np.ndarray:
    """Embeddings [N, D] float32 of the inputs x [N, ...], in batches."""
    x = np.asarray(x)
    if not len(x):
      raise ValueError('no inputs to embed')
    batches = []
    for start in range(0, len(x), self.batch_size):
      outputs = self._layer(self.preprocess(x[start:start + self.batch_size]))
      batches.append(tf.reshape(outputs, [outputs.shape[0], -1]))
    return tf.concat(batches, axis=0).numpy().astype(np.float32)


def embed_cached(encoder, x, cache_dir, key: str) -> np.ndarray:
  """``encoder.embed(x)``, computed once and kept in ``cache_dir/<key>-<hash>.npy``.

  The hash covers ``encoder.encoder_id`` and x's dtype, shape and bytes, so another
  encoder or other data never reads a stale file; ``key`` only names the file.
  """
  x = np.ascontiguousarray(x)
  digest = hashlib.sha256(json.dumps([encoder.encoder_id, x.dtype.str, x.shape]).encode())
  digest.update(x.tobytes())
  path = pathlib.Path(cache_dir) / f'{key}-{digest.hexdigest()[:20]}.npy'
  if path.exists():
    return np.load(path)
  embeddings = encoder.embed(x)
  path.parent.mkdir(parents=True, exist_ok=True)
  partial = path.with_name(f'{path.name}.{os.getpid()}.partial')
  with open(partial, 'wb') as f:
    np.save(f, embeddings)
  os.replace(partial, path)  # Atomic: a concurrent reader sees no half-written file.
  return embeddings
