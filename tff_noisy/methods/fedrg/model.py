"""FedRG's client model (``SemiFed`` in the code): the configured model's encoder h, a
SimCLR projector on h (Linear-BN-ReLU-Linear, as the code's ``MLP``), a new linear
classifier head on h and one carrier vector of the clients' own state (``layout``).

Its ``logits`` layer outputs the head's logits on h (what evaluation sees) and takes
[h, projection, carrier] concatenated, which the client part reads as the model's
features: the projection for Stage I's InfoNCE, h for the geometry, the carrier for T
(through which the noisy examples' loss is differentiated) and the mixture. Its value is
never used as it is: a client reads its own state as the carrier's change since it was
received plus the state it kept, and sends no change of it (``parts``), so the global
carrier stays zero."""

from typing import Callable

import tensorflow as tf

import models

CARRIER = 'fedrg_state'


class _Carrier(tf.keras.layers.Layer):
  """The carrier vector [S], tiled over the batch: [B, S]."""

  def __init__(self, size: int, **kwargs):
    super().__init__(**kwargs)
    self.size = int(size)

  def build(self, input_shape):
    self.carrier = self.add_weight(name=CARRIER, shape=[self.size], initializer='zeros',
                                   trainable=True)
    super().build(input_shape)

  def call(self, h):
    return tf.tile(self.carrier[None, :], [tf.shape(h)[0], 1])


class _Head(tf.keras.layers.Layer):
  """The classifier head on the first ``dim`` columns of the features."""

  def __init__(self, num_classes: int, dim: int, **kwargs):
    super().__init__(**kwargs)
    self.dim = int(dim)
    self.dense = tf.keras.layers.Dense(int(num_classes))

  def call(self, features):
    return self.dense(features[:, :self.dim])


def feature_dim(model_fn: Callable[[], tf.keras.Model]) -> int:
  """d: the width of the configured model's features (its ``logits`` layer's input)."""
  return models.feature_dim(model_fn())


def fedrg_model(model_fn: Callable[[], tf.keras.Model], carrier_size: int,
                projector_hidden: int, projector_dim: int) -> Callable[[], tf.keras.Model]:
  """A builder of FedRG's client model of ``model_fn``'s model (module doc)."""

  def build():
    base = model_fn()
    head = base.get_layer(models.LOGITS_LAYER)
    encoder = tf.keras.Model(base.inputs, head.input, name='encoder')
    num_classes, dim = int(head.output.shape[-1]), int(head.input.shape[-1])
    inputs = tf.keras.Input(base.input_shape[1:])
    h = encoder(inputs)
    p = tf.keras.layers.Dense(projector_hidden, name='projector_hidden')(h)
    p = tf.keras.layers.BatchNormalization(name='projector_bn')(p)
    p = tf.keras.layers.ReLU(name='projector_relu')(p)
    p = tf.keras.layers.Dense(projector_dim, name='projector_out')(p)
    carrier = _Carrier(carrier_size, name='fedrg_carrier')(h)
    features = tf.keras.layers.Concatenate(name='fedrg_features')([h, p, carrier])
    logits = _Head(num_classes, dim, name=models.LOGITS_LAYER)(features)
    return tf.keras.Model(inputs, logits, name='fedrg')

  return build


def carrier_index(model: tf.keras.Model) -> int:
  """The carrier's place among the model's trainable variables."""
  found = [i for i, v in enumerate(model.trainable_variables) if CARRIER in v.name]
  if len(found) != 1:
    raise ValueError(f'FedRG model: expected one {CARRIER!r} variable, found {len(found)}')
  return found[0]
