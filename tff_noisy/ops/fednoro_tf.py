"""FedNoRo's noisy-client loss in TensorFlow: the twin of ``fednoro.logit_adjusted_kd_loss``
(tests hold the two equal), run inside the client's training step."""

import tensorflow as tf


def logit_adjusted_kd_loss(labels, logits, teacher_probs, log_prior, present, kd_weight):
  """(1 - λ) (-log q_ŷ) + λ KL(p || q) per example [B] (``ops.fednoro`` module doc).

  ``teacher_probs`` p [B, C] (softmax of the teacher's logits / T, no gradient),
  ``log_prior`` log π [C], ``present`` [C] bool (classes the client has; an absent
  class's log q is replaced by 0), ``kd_weight`` λ.
  """
  log_q = tf.nn.log_softmax(logits + log_prior)
  log_q = tf.where(present[None, :], log_q, tf.zeros_like(log_q))
  p = tf.stop_gradient(teacher_probs)
  kl = tf.reduce_sum(tf.math.xlogy(p, p) - p * log_q, axis=-1)
  nll = -tf.gather(log_q, tf.cast(labels, tf.int32), batch_dims=1)
  return (1.0 - kd_weight) * nll + kd_weight * kl
