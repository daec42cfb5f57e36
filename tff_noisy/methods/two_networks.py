"""Two networks as one Keras model (Co-teaching's and Co-teaching+'s), so that the engine
federates both (the server aggregates every variable of the model, each network's its own).

The model holds two independently initialised copies f and g of the configured model;
its ``logits`` layer outputs f's logits (what evaluation and the training accuracy see)
and takes [f's logits, g's logits] concatenated, which the objective reads as the model's
features (``uses_features``). The configured model must be a functional Keras model
(as every zoo model; a user's ``model_fn`` is checked with the config).
"""

from typing import Callable

import tensorflow as tf

import models

BOTH = 'both_logits'


def two_networks(model_fn: Callable[[], tf.keras.Model]) -> Callable[[], tf.keras.Model]:
  """A builder of the two-network model of ``model_fn``'s model (module doc)."""

  def build():
    networks = [model_fn(), model_fn()]
    inputs = tf.keras.Input(networks[0].input_shape[1:])
    num_classes = networks[0].output_shape[-1]
    outputs = [tf.keras.Model(net.inputs, net.outputs, name=f'network_{i}')(inputs)
               for i, net in enumerate(networks, 1)]
    both = tf.keras.layers.Concatenate(name=BOTH)(outputs)
    first = tf.keras.layers.Lambda(lambda t: t[:, :num_classes], name=models.LOGITS_LAYER)
    return tf.keras.Model(inputs, first(both), name='coteaching')

  return build
