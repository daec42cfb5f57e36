"""ResNet-20 (He et al., CVPR 2016, §4.2): FedLN's vision model.

FedLN's official code: post-activation 3x3 basic blocks, 3 stages x 3 blocks of
16/32/64 filters with strides 1/2/2, option-A shortcuts (stride subsample + zero
channel pad, no parameters), he_normal, no conv bias, L2 1e-4, global average
pool, Dense logits.
"""

import tensorflow as tf

from models import layers as layers_lib

REQUIRES = 'an image (height, width, channels) of at least 8x8'
_GROUPS = 4
_WEIGHT_DECAY = 1e-4


@tf.keras.utils.register_keras_serializable(package='tff_noisy')
class OptionAShortcut(tf.keras.layers.Layer):
  """Identity shortcut that subsamples by ``stride`` and zero-pads channels."""

  def __init__(self, filters: int, stride: int, **kwargs):
    super().__init__(**kwargs)
    self.filters = filters
    self.stride = stride

  def call(self, x):
    x = x[:, ::self.stride, ::self.stride, :]
    extra = self.filters - x.shape[-1]
    return tf.pad(x, [[0, 0], [0, 0], [0, 0], [extra // 2, extra - extra // 2]])

  def get_config(self):
    return {**super().get_config(), 'filters': self.filters,
            'stride': self.stride}


def fits(input_shape: tuple) -> bool:
  return len(input_shape) == 3 and min(input_shape[:2]) >= 8


def build(input_shape: tuple, num_classes: int, *, norm: str) -> tf.keras.Model:
  """ResNet-20 with GroupNorm (default: FedAvg-safe) or BatchNorm (paper)."""
  layers = tf.keras.layers

  def conv(x, filters, stride=1):
    return layers.Conv2D(
        filters, 3, strides=stride, padding='same', use_bias=False,
        kernel_initializer='he_normal',
        kernel_regularizer=tf.keras.regularizers.L2(_WEIGHT_DECAY))(x)

  def norm_layer(x):
    return layers_lib.normalization(norm, _GROUPS)(x)

  inputs = tf.keras.Input(shape=input_shape)
  x = layers.ReLU()(norm_layer(conv(inputs, 16)))
  for stage, filters in enumerate((16, 32, 64)):
    for block in range(3):
      stride = 2 if stage > 0 and block == 0 else 1
      y = layers.ReLU()(norm_layer(conv(x, filters, stride)))
      y = norm_layer(conv(y, filters))
      if stride > 1 or x.shape[-1] != filters:
        x = OptionAShortcut(filters, stride)(x)
      x = layers.ReLU()(layers.Add()([x, y]))
  x = layers.GlobalAveragePooling2D()(x)
  logits = layers.Dense(
      num_classes, kernel_initializer='he_normal',
      kernel_regularizer=tf.keras.regularizers.L2(_WEIGHT_DECAY),
      name='logits')(x)
  return tf.keras.Model(inputs, logits, name=f'resnet20_{norm}')
