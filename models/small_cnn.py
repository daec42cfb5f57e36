"""The small CNN of the FedLN CPU reproduction (docs/papers/fedln.md).

Conv32 -> Conv64 -> MaxPool -> Dense128, no normalisation: what (Fashion-)MNIST
needs on two CPU cores. 'same' padding lets it also run on 8x8 digits.
"""

import tensorflow as tf

REQUIRES = 'an image (height, width, channels) of at least 2x2'


def fits(input_shape: tuple) -> bool:
  return len(input_shape) == 3 and min(input_shape[:2]) >= 2


def build(input_shape: tuple, num_classes: int) -> tf.keras.Model:
  """Conv32 3x3 -> Conv64 3x3 -> MaxPool 2 -> Dense128 -> Dense(num_classes)."""
  layers = tf.keras.layers
  inputs = tf.keras.Input(shape=input_shape)
  x = layers.Conv2D(32, 3, padding='same', activation='relu')(inputs)
  x = layers.Conv2D(64, 3, padding='same', activation='relu')(x)
  x = layers.MaxPooling2D(2)(x)
  x = layers.Flatten()(x)
  x = layers.Dense(128, activation='relu')(x)
  logits = layers.Dense(num_classes, name='logits')(x)
  return tf.keras.Model(inputs, logits, name='small_cnn')
