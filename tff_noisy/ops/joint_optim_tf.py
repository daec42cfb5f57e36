"""TensorFlow twin of ``joint_optim`` (Tanaka et al. 2018), run in client training on a
batch's rows of the client state (``labels`` [B, C], ``history`` [B, q, C], ``count``
int32 [B]). The soft labels are constants of the step; L_p's batch mean s̄ carries the
gradient, as in both codes. Works in the logits' float dtype."""

import tensorflow as tf

from tff_noisy.ops import coteaching_plus_tf


def classification_loss(soft_labels, logits):
  """``joint_optim.classification_loss``: [B]."""
  soft_labels = tf.stop_gradient(tf.cast(soft_labels, logits.dtype))
  return -tf.reduce_sum(soft_labels * tf.nn.log_softmax(logits), axis=-1)


def prior_loss(logits, prior=None):
  """``joint_optim.prior_loss``: a scalar; ``prior`` [C] or None (uniform)."""
  s_bar = tf.reduce_mean(tf.nn.softmax(logits), axis=0)
  if prior is None:
    prior = tf.fill(tf.shape(s_bar), tf.cast(1.0, logits.dtype)) / tf.cast(
        tf.shape(s_bar)[0], logits.dtype)
  prior = tf.cast(prior, logits.dtype)
  return tf.reduce_sum(tf.math.xlogy(prior, prior) - tf.math.xlogy(prior, s_bar))


def entropy_loss(logits):
  """``joint_optim.entropy_loss``: [B]."""
  log_s = tf.nn.log_softmax(logits)
  return -tf.reduce_sum(tf.exp(log_s) * log_s, axis=-1)


def joint_loss(soft_labels, logits, alpha, beta, prior=None):
  """``joint_optim.joint_loss``: CE_j + α·L_p + β·H_j [B]."""
  alpha, beta = tf.cast(alpha, logits.dtype), tf.cast(beta, logits.dtype)
  return (classification_loss(soft_labels, logits) + alpha * prior_loss(logits, prior)
          + beta * entropy_loss(logits))


def update_history(history, count, probabilities):
  """``joint_optim.update_history``: ``(history, count)`` rows."""
  queue = tf.shape(history)[1]
  slot = tf.equal(tf.range(queue)[None, :], (count % queue)[:, None])
  probabilities = tf.stop_gradient(tf.cast(probabilities, history.dtype))
  return tf.where(slot[..., None], probabilities[:, None, :], history), count + 1


def updated_labels(history, count, labels, hard: bool = False, divide_by_filled: bool = False):
  """``joint_optim.updated_labels``: [B, C] in ``labels``' dtype."""
  queue = tf.shape(history)[1]
  written = tf.minimum(count, queue) if divide_by_filled else tf.fill(tf.shape(count), queue)
  soft = tf.reduce_sum(history, axis=1) / tf.cast(tf.maximum(written, 1), history.dtype)[:, None]
  if hard:
    soft = tf.one_hot(coteaching_plus_tf.predictions(soft), tf.shape(history)[2],
                      dtype=history.dtype)
  return tf.where((count > 0)[:, None], tf.cast(soft, labels.dtype), labels)
