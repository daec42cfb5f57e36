"""A one-hidden-layer perceptron: the fast baseline for sklearn digits (8x8)."""

import tensorflow as tf

REQUIRES = 'any input shape'


def fits(input_shape: tuple) -> bool:
  del input_shape  # Flatten accepts every shape.
  return True


def build(input_shape: tuple, num_classes: int, *, width: int) -> tf.keras.Model:
  """Flatten -> Dense(width, relu) -> Dense(num_classes) logits (checked by the registry)."""
  inputs = tf.keras.Input(shape=input_shape)
  x = tf.keras.layers.Flatten()(inputs)
  x = tf.keras.layers.Dense(width, activation='relu')(x)
  logits = tf.keras.layers.Dense(num_classes, name='logits')(x)
  return tf.keras.Model(inputs, logits, name='mlp')
