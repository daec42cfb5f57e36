"""FedDS's CIFAR-10 model: a VGG-style CNN (Simonyan & Zisserman 2014) of 6 convolutions
and 3 dense layers (FedDS §5.1, from the authors' code).

Three blocks of two 3x3 convs (64, 64 | 128, 128 | 256, 256), each conv followed by a
norm and ReLU, each block by a 2x2 max-pool; then Dense 512, ReLU, Dropout 0.5, Dense
512, ReLU, Dropout 0.5, Dense logits. On 32x32x3 the flattened features are 4x4x256 =
4,096 wide, as in the paper's "FC 4096 -> 512 -> 512 -> 10". ``norm: batch`` as FedDS's
code, or ``group`` (32 groups). Convs keep their bias, as the authors' PyTorch layers do.
"""

import tensorflow as tf

from models import layers as layers_lib

REQUIRES = 'an image (height, width, channels) of at least 8x8 (three 2x2 pools)'
_GROUPS = 32


def fits(input_shape: tuple) -> bool:
  return len(input_shape) == 3 and min(input_shape[:2]) >= 8


def build(input_shape: tuple, num_classes: int, *, norm: str) -> tf.keras.Model:
  """The VGG-style CNN; ``norm='batch'`` as FedDS's code, or ``'group'``."""
  layers = tf.keras.layers
  inputs = tf.keras.Input(shape=input_shape)
  x = inputs
  for filters in (64, 128, 256):
    for _ in range(2):
      x = layers.Conv2D(filters, 3, padding='same')(x)
      x = layers.ReLU()(layers_lib.normalization(norm, _GROUPS)(x))
    x = layers.MaxPooling2D(2)(x)
  x = layers.Flatten()(x)
  for _ in range(2):
    x = layers.Dropout(0.5)(layers.Dense(512, activation='relu')(x))
  logits = layers.Dense(num_classes, name='logits')(x)
  return tf.keras.Model(inputs, logits, name=f'vgg9_{norm}')
