"""TensorFlow twin of ``elr`` (Liu et al. 2020), run in client training on a batch's rows
of the client's target table. The targets are constants of the step (the authors' code
detaches them); the regulariser's gradient flows through the clamped softmax only. Works
in the logits' float dtype."""

import tensorflow as tf

from tff_noisy.ops.elr import CLAMP


def clamped_probabilities(logits, eps: float = CLAMP):
  """``elr.clamped_probabilities``: [B, C]."""
  return tf.clip_by_value(tf.nn.softmax(logits), eps, 1.0 - eps)


def updated_targets(targets, logits, beta: float, eps: float = CLAMP):
  """``elr.updated_targets``: [B, C] in ``targets``' dtype, no gradient (Eq. 9)."""
  clamped = tf.stop_gradient(tf.cast(clamped_probabilities(logits, eps), targets.dtype))
  normalised = clamped / tf.reduce_sum(clamped, axis=-1, keepdims=True)
  beta = tf.constant(beta, targets.dtype)  # Not tf.cast: a Python float would pass float32.
  return beta * targets + (1.0 - beta) * normalised


def regulariser(targets, logits, eps: float = CLAMP):
  """``elr.regulariser``: log(1 − ⟨t_i, clamp(p_i)⟩) [B] (Eq. 7)."""
  targets = tf.stop_gradient(tf.cast(targets, logits.dtype))
  inner = tf.reduce_sum(targets * clamped_probabilities(logits, eps), axis=-1)
  return tf.math.log1p(-inner)


def elr_term(targets, logits, lam: float, eps: float = CLAMP):
  """λ·log(1 − ⟨t_i, clamp(p_i)⟩) [B]: Eq. 7 beside the cross-entropy part."""
  return tf.constant(lam, logits.dtype) * regulariser(targets, logits, eps)
