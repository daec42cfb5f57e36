"""TensorFlow twin of ``selfie`` (Song et al. 2019, Algorithm 1), run in client training on
a batch's rows of the client state (``history`` int32 [B, q], ``count`` int32 [B],
``refurbished`` int32 [B]); the selection and the refurbished labels are constants of the
step (no gradient flows through them)."""

import tensorflow as tf

from tff_noisy.ops import coteaching_plus_tf
from tff_noisy.ops import losses
from tff_noisy.ops.selfie import NOT_REFURBISHED


def update_history(history, count, predictions):
  """``selfie.update_history``: ``(history, count)`` rows."""
  queue = tf.shape(history)[1]
  slot = tf.equal(tf.range(queue)[None, :], (count % queue)[:, None])
  predictions = tf.cast(predictions, history.dtype)
  return tf.where(slot, predictions[:, None], history), count + 1


def label_distribution(history, count, num_classes: int, count_empty_slots: bool = True):
  """``selfie.label_distribution``: float32 [B, C]."""
  queue = tf.shape(history)[1]
  if count_empty_slots:
    votes = tf.ones(tf.shape(history), tf.float32)
  else:
    votes = tf.cast(tf.range(queue)[None, :] < tf.minimum(count, queue)[:, None], tf.float32)
  counts = tf.reduce_sum(tf.one_hot(history, num_classes) * votes[..., None], axis=1)
  return tf.math.divide_no_nan(counts, tf.reduce_sum(votes, axis=1, keepdims=True))


def uncertainty(history, count, num_classes: int, count_empty_slots: bool = True):
  """``selfie.uncertainty``: float32 [B]."""
  if num_classes < 2:
    raise ValueError(f'uncertainty needs num_classes >= 2, got {num_classes}')
  probs = label_distribution(history, count, num_classes, count_empty_slots)
  entropy = -tf.reduce_sum(tf.math.xlogy(probs, probs), axis=1) / tf.math.log(
      float(num_classes))
  return tf.where(tf.reduce_sum(probs, axis=1) > 0, entropy, 1.0)


def history_mode(history, count, num_classes: int, count_empty_slots: bool = True):
  """``selfie.history_mode``: int32 [B], the smallest class on a tie."""
  return coteaching_plus_tf.predictions(
      label_distribution(history, count, num_classes, count_empty_slots))


def refurbish(history, count, refurbished, num_classes: int, threshold: float,
              count_empty_slots: bool = True):
  """``selfie.refurbish``: int32 [B]."""
  now = tf.logical_and(count > 0, uncertainty(history, count, num_classes, count_empty_slots)
                       <= threshold)
  mode = history_mode(history, count, num_classes, count_empty_slots)
  return tf.where(now, mode, tf.cast(refurbished, tf.int32))


def num_clean(batch_size, noise_rate: float):
  """``selfie.num_clean``: ⌈(1 - τ)·B⌉ in float64 from the Python float τ, int32."""
  kept = tf.math.ceil(tf.cast(batch_size, tf.float64) * (1.0 - float(noise_rate)))
  return tf.cast(kept, tf.int32)


def loss_mask_and_targets(labels, per_example, refurbished, noise_rate: float):
  """``selfie.loss_mask_and_targets``: ``(mask float32 [B], targets int32 [B])``."""
  batch = tf.shape(per_example)[0]
  order = tf.argsort(tf.stop_gradient(per_example), stable=True)
  ranks = tf.argsort(order, stable=True)
  done = tf.not_equal(refurbished, NOT_REFURBISHED)
  mask = tf.logical_or(ranks < num_clean(batch, noise_rate), done)
  targets = tf.where(done, tf.cast(refurbished, tf.int32), tf.cast(labels, tf.int32))
  return tf.cast(mask, tf.float32), targets


def selfie_loss(labels, logits, refurbished, noise_rate: float):
  """``selfie.selfie_loss``: (B/k)·m_j·CE(z_j, ỹ_j) [B]."""
  mask, targets = loss_mask_and_targets(labels, losses.cross_entropy(labels, logits),
                                        refurbished, noise_rate)
  scale = tf.cast(tf.shape(mask)[0], tf.float32) / tf.maximum(tf.reduce_sum(mask), 1.0)
  return scale * mask * losses.cross_entropy(targets, logits)


def client_step(labels, logits, history, count, refurbished, num_classes: int,
                threshold: float, noise_rate: float, active,
                count_empty_slots: bool = True):
  """``selfie.client_step``; ``active`` a scalar tensor (nonzero after warm-up, a
  server-decided hparam). Returns ``(loss, history, count, refurbished)`` rows."""
  history, count = update_history(history, count,
                                  coteaching_plus_tf.predictions(tf.stop_gradient(logits)))
  active = tf.cast(active, tf.bool)
  refurbished = tf.where(active, refurbish(history, count, refurbished, num_classes,
                                           threshold, count_empty_slots),
                         tf.cast(refurbished, tf.int32))
  loss = tf.where(active, selfie_loss(labels, logits, refurbished, noise_rate),
                  losses.cross_entropy(labels, logits))
  return loss, history, count, refurbished
