"""TensorFlow twin of ``coteaching_plus`` (Yu et al. 2019, Algorithm 1), run in client
training; the disagreement set and the selection are constants of the step (no gradient
flows through the predictions or the ranking)."""

import tensorflow as tf

from tff_noisy.ops import coteaching_tf
from tff_noisy.ops import losses
from tff_noisy.ops.coteaching_plus import NONE_KEPT


def predictions(logits):
  """``coteaching_plus.predictions``: int32 [B], the first class on a tie (deterministic,
  unlike ``tf.argmax``'s unspecified tie)."""
  num_classes = tf.shape(logits)[-1]
  is_max = logits >= tf.reduce_max(logits, axis=-1, keepdims=True)
  classes = tf.broadcast_to(tf.range(num_classes), tf.shape(logits))
  return tf.reduce_min(tf.where(is_max, classes, num_classes), axis=-1)


def disagreement_mask(logits_f, logits_g):
  """``coteaching_plus.disagreement_mask`` as float32 [B] (1 on D̄')."""
  differ = tf.not_equal(predictions(tf.stop_gradient(logits_f)),
                        predictions(tf.stop_gradient(logits_g)))
  return tf.cast(differ, tf.float32)


def kept_count(size, rate):
  """``coteaching_plus.kept_count``: ⌊(1 - τ)·d⌋ in float32, int32 (may be 0)."""
  return tf.cast(tf.math.floor((1.0 - rate) * tf.cast(size, tf.float32)), tf.int32)


def ranked_cross_entropy(labels, logits, on_probabilities: bool = True):
  """``coteaching_plus.ranked_cross_entropy``."""
  if on_probabilities:
    logits = tf.nn.softmax(logits)
  return losses.cross_entropy(labels, logits)


def _ranks(per_example, within):
  """Rank of each example by ``per_example`` among ``within`` (others after; ties: the
  earlier example)."""
  keyed = tf.where(within > 0, tf.stop_gradient(per_example), float('inf'))
  order = tf.argsort(keyed, stable=True)
  return tf.argsort(order, stable=True)  # The inverse permutation.


def disagreement_loss(labels, logits_f, logits_g, rate, on_probabilities: bool = True,
                      none_kept: str = 'skip'):
  """``coteaching_plus.disagreement_loss``; ``rate`` a float32 scalar tensor (τ(T))."""
  if none_kept not in NONE_KEPT:
    raise ValueError(f'none_kept must be one of {NONE_KEPT}, got {none_kept!r}')
  ce_f = ranked_cross_entropy(labels, logits_f, on_probabilities)
  ce_g = ranked_cross_entropy(labels, logits_g, on_probabilities)
  disagree = disagreement_mask(logits_f, logits_g)
  batch = tf.shape(ce_f)[0]
  size = tf.cast(tf.reduce_sum(disagree), tf.int32)
  kept = kept_count(size, rate)
  if none_kept == 'all':
    kept = tf.where(kept == 0, size, kept)
  everything = tf.equal(size, 0)
  kept_f = tf.where(everything, 1.0, tf.cast(_ranks(ce_f, disagree) < kept, tf.float32))
  kept_g = tf.where(everything, 1.0, tf.cast(_ranks(ce_g, disagree) < kept, tf.float32))
  kept = tf.where(everything, batch, kept)
  scale = tf.cast(batch, tf.float32) / tf.cast(tf.maximum(kept, 1), tf.float32)
  return scale * (kept_g * ce_f + kept_f * ce_g)


def cross_update_loss(labels, logits_f, logits_g, rate, disagreement,
                      on_probabilities: bool = True, none_kept: str = 'skip'):
  """``coteaching_plus.cross_update_loss``; ``disagreement`` a scalar tensor (nonzero from
  round init_epoch + 1 on, a server-decided hparam)."""
  plus = disagreement_loss(labels, logits_f, logits_g, rate, on_probabilities, none_kept)
  plain = coteaching_tf.cross_update_loss(labels, logits_f, logits_g, rate)
  return tf.where(tf.cast(disagreement, tf.bool), plus, plain)
