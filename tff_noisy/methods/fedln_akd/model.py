"""FedLN-AKD's client model: the configured model with a linear representation head h
beside its classifier, both on the pooled features φ(x) (the code's ``Dense(
embeddings_dim)(flow)`` next to ``Dense(n_classes)(flow)`` in ``models/cnn.py``).

Its ``logits`` layer is the configured model's own classifier on the first columns of
[φ(x), h(φ(x))] (what evaluation sees is the configured model's logits); the client part
reads the rest of those features as the head's output e."""

from typing import Callable

import tensorflow as tf

import models

HEAD = 'akd_head'


class _Classifier(tf.keras.layers.Layer):
  """The configured model's classifier layer on the first ``dim`` columns."""

  def __init__(self, dense: tf.keras.layers.Layer, dim: int, **kwargs):
    super().__init__(**kwargs)
    self.dense = dense
    self.dim = int(dim)

  def call(self, features):
    return self.dense(features[:, :self.dim])


def akd_model(model_fn: Callable[[], tf.keras.Model], width: int) -> Callable[[], tf.keras.Model]:
  """A builder of ``model_fn``'s model with the head h: φ -> R^width (module doc)."""

  def build():
    base = model_fn()
    classifier = base.get_layer(models.LOGITS_LAYER)
    encoder = tf.keras.Model(base.inputs, classifier.input, name='akd_encoder')
    inputs = tf.keras.Input(base.input_shape[1:])
    features = encoder(inputs)
    head = tf.keras.layers.Dense(int(width), name=HEAD)(features)
    both = tf.keras.layers.Concatenate(name='akd_features')([features, head])
    logits = _Classifier(classifier, int(features.shape[-1]), name=models.LOGITS_LAYER)(both)
    return tf.keras.Model(inputs, logits, name=f'{base.name}_akd')

  return build
