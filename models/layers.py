"""Layers shared by the model zoo."""

import numpy as np
import tensorflow as tf

from tff_noisy.zoo import NORMS


def check_norm(norm: str) -> None:
  if norm not in NORMS:
    raise ValueError(f'norm must be one of {NORMS}, got {norm!r}')


def normalization(norm: str, groups: int) -> tf.keras.layers.Layer:
  """GroupNorm (Wu & He, 2018) or BatchNorm over the channel axis.

  GroupNorm has no non-trainable statistics, so plain federated averaging of
  trainable weights averages the whole model; BatchNorm's moving mean and
  variance are non-trainable and need an aggregator that averages them too.
  """
  check_norm(norm)
  if norm == 'group':
    return GroupNormalization(groups=groups)
  return tf.keras.layers.BatchNormalization()


@tf.keras.utils.register_keras_serializable(package='tff_noisy')
class GroupNormalization(tf.keras.layers.GroupNormalization):
  """Keras GroupNormalization (channels last) in TFLite-friendly maths.

  Same weights and outputs as the Keras layer, whose moments are weighted by an
  all-ones mask of dynamic shape: TFLite turns that into a BROADCAST_TO that
  fails at run time for a dynamic batch. Here per-channel moments are pooled
  into groups and spread back to channels by two small constant matrices, so
  the layer runs as MEAN, SQUARED_DIFFERENCE, FULLY_CONNECTED, MUL and ADD:
  TFLite builtins, 3x faster in TFLite than moments of a 5-D grouped tensor.
  """

  def build(self, input_shape):
    if self.axis not in (-1, len(input_shape) - 1):
      raise ValueError(f'GroupNormalization needs channels last, got axis '
                       f'{self.axis} for input shape {input_shape}')
    super().build(input_shape)
    size = input_shape[-1] // self.groups
    spread = np.kron(np.eye(self.groups), np.ones((1, size)))  # [groups, C]
    self._pool = spread.T / size
    self._spread = spread

  def call(self, inputs):
    axes = list(range(1, inputs.shape.rank - 1))
    pool = tf.constant(self._pool, inputs.dtype)
    spread = tf.constant(self._spread, inputs.dtype)
    stat_shape = [-1] + [1] * len(axes) + [inputs.shape[-1]]

    def group_moment(x):
      channel_moment = tf.reduce_mean(x, axes)
      return tf.reshape(tf.matmul(tf.matmul(channel_moment, pool), spread),
                        stat_shape)

    mean = group_moment(inputs)
    scale = tf.math.rsqrt(
        group_moment(tf.math.squared_difference(inputs, mean)) + self.epsilon)
    if self.scale:
      scale *= self.gamma
    offset = -mean * scale
    if self.center:
      offset += self.beta
    return inputs * scale + offset
