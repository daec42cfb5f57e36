"""TensorFlow twin of ``moon.model_contrastive_loss`` (MOON, Eq. 3), run in client training;
no gradient reaches the frozen models' representations."""

import tensorflow as tf


def _cosine(a, b):
  return tf.reduce_sum(tf.math.l2_normalize(a, axis=-1) * tf.math.l2_normalize(b, axis=-1),
                       axis=-1)


def model_contrastive_loss(features, global_features, previous_features,
                           temperature: float):
  """``moon.model_contrastive_loss``: [B]."""
  positive = _cosine(features, tf.stop_gradient(global_features)) / temperature
  negative = _cosine(features, tf.stop_gradient(previous_features)) / temperature
  return tf.math.softplus(negative - positive)
