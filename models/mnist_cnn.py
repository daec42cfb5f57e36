"""The FedDS paper's MNIST CNN (from the authors' code: the PyTorch MNIST example net).

Conv(10, 5x5) -> MaxPool 2 -> ReLU; Conv(20, 5x5) -> Dropout2d(0.5) -> MaxPool 2 ->
ReLU; Dense 50 + ReLU -> Dropout(0.5) -> Dense logits: 21,840 parameters on 28x28x1.
"""

import tensorflow as tf

REQUIRES = 'an image (height, width, channels) of at least 16x16'


def fits(input_shape: tuple) -> bool:
  return len(input_shape) == 3 and min(input_shape[:2]) >= 16


def build(input_shape: tuple, num_classes: int) -> tf.keras.Model:
  """The two valid 5x5 convolutions take 28x28 down to 4x4x20 = 320 features."""
  layers = tf.keras.layers
  inputs = tf.keras.Input(shape=input_shape)
  x = layers.Conv2D(10, 5)(inputs)
  x = layers.ReLU()(layers.MaxPooling2D(2)(x))
  x = layers.Conv2D(20, 5)(x)
  x = layers.SpatialDropout2D(0.5)(x)
  x = layers.ReLU()(layers.MaxPooling2D(2)(x))
  x = layers.Flatten()(x)
  x = layers.Dense(50, activation='relu')(x)
  x = layers.Dropout(0.5)(x)
  logits = layers.Dense(num_classes, name='logits')(x)
  return tf.keras.Model(inputs, logits, name='mnist_cnn')
