"""TensorFlow twins of ``baseline_losses`` (float32), run inside the clients' training.

Every loss works from ``log_softmax`` (or the tempered one's log), never from a
probability's own log, so a logit of +-100 (p_y underflowing to 0) keeps its gradient
finite.
"""

import tensorflow as tf


def _log_p_y(labels, log_p):
  return tf.gather(log_p, tf.cast(labels, tf.int32), batch_dims=1)


def label_smoothing_cross_entropy(labels, logits, smoothing: float):
  """``baseline_losses.label_smoothing_cross_entropy``."""
  log_p = tf.nn.log_softmax(logits)
  num_classes = tf.cast(tf.shape(logits)[-1], logits.dtype)
  targets = ((1.0 - smoothing) * tf.one_hot(tf.cast(labels, tf.int32), tf.shape(logits)[-1],
                                            dtype=logits.dtype) + smoothing / num_classes)
  return -tf.reduce_sum(targets * log_p, axis=-1)


def _exp_t(u, t: float):
  return tf.exp(u) if t == 1.0 else tf.nn.relu(1.0 + (1.0 - t) * u) ** (1.0 / (1.0 - t))


def _log_t(u, t: float):
  return tf.math.log(u) if t == 1.0 else (u ** (1.0 - t) - 1.0) / (1.0 - t)


def tempered_log_softmax(logits, t: float, num_iters: int = 5):
  """``baseline_losses.tempered_log_softmax``; the fixed-point iteration is unrolled."""
  if t == 1.0:
    return tf.nn.log_softmax(logits)
  mu = tf.reduce_max(logits, axis=-1, keepdims=True)
  shifted = logits - mu
  normalized = shifted
  for _ in range(num_iters):
    partition = tf.reduce_sum(_exp_t(normalized, t), axis=-1, keepdims=True)
    normalized = shifted * partition ** (1.0 - t)
  partition = tf.reduce_sum(_exp_t(normalized, t), axis=-1, keepdims=True)
  normaliser = -_log_t(1.0 / partition, t) + mu
  return tf.math.log(1.0 + (1.0 - t) * (logits - normaliser)) / (1.0 - t)


def bi_tempered_logistic_loss(labels, logits, t1: float, t2: float, smoothing: float = 0.0,
                              num_iters: int = 5):
  """``baseline_losses.bi_tempered_logistic_loss`` (Amid et al. 2019)."""
  log_p = tempered_log_softmax(logits, t2, num_iters)
  num_classes = tf.shape(logits)[-1]
  targets = tf.one_hot(tf.cast(labels, tf.int32), num_classes, dtype=logits.dtype)
  if smoothing:
    c = tf.cast(num_classes, logits.dtype)
    targets = (1.0 - c / (c - 1.0) * smoothing) * targets + smoothing / (c - 1.0)
  log_t1_p = log_p if t1 == 1.0 else (tf.exp((1.0 - t1) * log_p) - 1.0) / (1.0 - t1)
  first = (_log_t(targets + 1e-10, t1) - log_t1_p) * targets
  second = (targets ** (2.0 - t1) - tf.exp((2.0 - t1) * log_p)) / (2.0 - t1)
  return tf.reduce_sum(first - second, axis=-1)


def symmetric_cross_entropy(labels, logits, alpha: float, beta: float,
                            log_zero: float = -4.0):
  """``baseline_losses.symmetric_cross_entropy`` (Wang et al. 2019)."""
  log_p_y = _log_p_y(labels, tf.nn.log_softmax(logits))
  return alpha * -log_p_y + beta * -log_zero * (1.0 - tf.exp(log_p_y))


def generalized_cross_entropy(labels, logits, q: float):
  """``baseline_losses.generalized_cross_entropy`` (Zhang & Sabuncu 2018)."""
  return (1.0 - tf.exp(q * _log_p_y(labels, tf.nn.log_softmax(logits)))) / q


def clip_logits(logits, tau: float, p: float = 2.0):
  """``baseline_losses.clip_logits`` (Wei et al. 2023). The norm is taken only
  of rows outside the ball (1 elsewhere), so an all-zero row has a finite gradient."""
  powered = tf.reduce_sum(tf.abs(logits) ** p, axis=-1, keepdims=True)
  outside = powered > tau ** p
  norms = tf.where(outside, powered, tf.ones_like(powered)) ** (1.0 / p)
  return logits * tf.where(outside, tau / norms, tf.ones_like(norms))


def logit_clip_cross_entropy(labels, logits, tau: float, p: float = 2.0):
  """``baseline_losses.logit_clip_cross_entropy`` (LogitClip, Wei et al. 2023)."""
  return -_log_p_y(labels, tf.nn.log_softmax(clip_logits(logits, tau, p)))
