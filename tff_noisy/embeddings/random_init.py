"""A frozen, randomly initialised encoder: the control for a pretrained one.

LSC's Table 4 (§5.3 of the paper) replaces the pretrained reference encoder by the same
architecture, randomly initialised and never trained, to show how much of the gain is
due to pretraining. :class:`RandomBackboneEncoder` is that control for this project's
offline SSL encoder: the backbone of ``embed pretrain``
(:func:`tff_noisy.embeddings.pretrain.build_backbone`, conv 32-64-128 + global average
pooling, 128-d) with Keras' default initialisation (Glorot-uniform kernels, BatchNorm
at identity), seeded, in inference mode. It duck-types the encoders of
:mod:`tff_noisy.embeddings.hub` (``encoder_id``, ``embed``).
"""

import hashlib

import numpy as np
import tensorflow as tf

from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import pretrain

WIDTH = 32  # As ``embed pretrain``'s default backbone.


def fits(input_shape) -> bool:
  """The backbone takes images (height, width, channels)."""
  return len(tuple(input_shape)) == 3


def seeded_backbone(input_shape, seed: int) -> tf.keras.Model:
  """``pretrain.build_backbone(input_shape)`` with Glorot-uniform kernels drawn from
  ``seed`` (stateless: the same weights every time)."""
  backbone = pretrain.build_backbone(tuple(input_shape), WIDTH)
  for index, variable in enumerate(backbone.trainable_variables):
    if 'kernel' in variable.name:
      variable.assign(tf.keras.initializers.GlorotUniform(seed=seed * 1000 + index)(
          variable.shape))
  return backbone


class RandomBackboneEncoder:
  """``pretrain.build_backbone(input_shape)``, seeded random weights, frozen."""

  dim = 4 * WIDTH  # The backbone's representation width.

  def __init__(self, input_shape, seed: int, batch_size: int = 512):
    self.input_shape = tuple(input_shape)
    if not fits(self.input_shape):
      raise ValueError(f'the random backbone needs images (height, width, channels), got '
                       f'input shape {self.input_shape}')
    self.batch_size = batch_size
    self._backbone = seeded_backbone(self.input_shape, seed)
    self.encoder_id = 'random-backbone-' + hashlib.sha256(
        repr((self.input_shape, WIDTH, seed)).encode()).hexdigest()

  def embed(self, x) -> np.ndarray:
    """Embeddings [N, 128] float32 of images x [N, H, W, C]."""
    x = hub_lib.as_float_inputs(x)
    if not len(x):
      raise ValueError('no inputs to embed')
    return np.concatenate([
        self._backbone(x[start:start + self.batch_size], training=False).numpy()
        for start in range(0, len(x), self.batch_size)]).astype(np.float32)
