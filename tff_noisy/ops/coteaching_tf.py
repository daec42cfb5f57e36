"""TensorFlow twin of ``coteaching.cross_update_loss``, run in client training; the
selection is a constant of the step (no gradient flows through the ranking)."""

import tensorflow as tf

from tff_noisy.ops import losses


def _small_loss_mask(per_example, remembered):
  order = tf.argsort(tf.stop_gradient(per_example), stable=True)
  kept = tf.scatter_nd(order[:remembered, None], tf.ones([remembered]),
                       tf.shape(per_example))
  return kept


def cross_update_loss(labels, logits_f, logits_g, rate):
  """``coteaching.cross_update_loss``; ``rate`` a float32 scalar tensor (τ(T))."""
  ce_f, ce_g = losses.cross_entropy(labels, logits_f), losses.cross_entropy(labels, logits_g)
  batch = tf.shape(ce_f)[0]
  remembered = tf.maximum(1, tf.cast(tf.math.floor((1.0 - rate) * tf.cast(batch, tf.float32)),
                                     tf.int32))
  kept_f, kept_g = _small_loss_mask(ce_f, remembered), _small_loss_mask(ce_g, remembered)
  scale = tf.cast(batch, tf.float32) / tf.cast(remembered, tf.float32)
  return scale * (kept_g * ce_f + kept_f * ce_g)
