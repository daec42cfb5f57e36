"""Co-teaching's 9-layer CNN (Han et al., NeurIPS 2018), FedEFC's MNIST model.

FedEFC §4.2 (Co-teaching's CNN): 3x conv128, pool, dropout .25, 3x conv256, pool, dropout
.25, then conv512/256/128 unpadded; each conv with a norm and leaky-ReLU 0.01;
global average pool; linear. All kernels are 3x3 and the dropout is channel-wise
(Co-teaching's ``F.dropout2d``). Convs have no bias: the norm's offset
replaces it.
"""

import tensorflow as tf

from models import layers as layers_lib

REQUIRES = ('an image (height, width, channels) of at least 28x28 (two 2x2 '
            'pools, then three unpadded 3x3 convs)')
_GROUPS = 32  # GroupNorm's default group count (Wu & He, 2018).


def fits(input_shape: tuple) -> bool:
  return len(input_shape) == 3 and min(input_shape[:2]) >= 28


def build(input_shape: tuple, num_classes: int, *, norm: str) -> tf.keras.Model:
  """The Co-teaching CNN; ``norm='batch'`` as in the paper, or ``'group'``."""
  layers = tf.keras.layers

  def conv(x, filters, padding):
    x = layers.Conv2D(filters, 3, padding=padding, use_bias=False)(x)
    x = layers_lib.normalization(norm, _GROUPS)(x)
    return layers.LeakyReLU(0.01)(x)

  inputs = tf.keras.Input(shape=input_shape)
  x = inputs
  for filters in (128, 256):
    for _ in range(3):
      x = conv(x, filters, 'same')
    x = layers.MaxPooling2D(2)(x)
    x = layers.SpatialDropout2D(0.25)(x)
  for filters in (512, 256, 128):
    x = conv(x, filters, 'valid')
  x = layers.GlobalAveragePooling2D()(x)
  logits = layers.Dense(num_classes, name='logits')(x)
  return tf.keras.Model(inputs, logits, name='cnn9')
