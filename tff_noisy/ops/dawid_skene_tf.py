"""The client-side Dawid-Skene steps in TensorFlow, for FedDS's federated EM.

In the federated EM a client keeps its public-set predictions and runs these inside a
TFF computation; the server only sees their sum over clients. They are the TensorFlow
twins of ``dawid_skene.local_m_step``, ``local_log_likelihood_terms`` and
``client_reliability`` (float64, same epsilon), and tests hold them equal.
"""

import tensorflow as tf

from tff_noisy.ops.dawid_skene import EPSILON


def local_m_step(predictions, posteriors, smoothing: float = 0.0):
  """Eq. 10 for one client: [N] votes and [N, C] posteriors -> its [C, C] confusion."""
  num_classes = tf.shape(posteriors)[1]
  votes = tf.one_hot(predictions, num_classes, dtype=tf.float64)  # [N, C]
  counts = tf.matmul(posteriors, votes, transpose_a=True) + smoothing  # [C (true), C (voted)]
  totals = tf.reduce_sum(counts, axis=1, keepdims=True)
  return tf.math.divide_no_nan(counts, totals)


def local_log_likelihood_terms(predictions, confusion):
  """log(m_{c, y_i} + eps) as [N, C]: this client's part of Eq. 9's numerator."""
  return tf.transpose(tf.gather(tf.math.log(confusion + EPSILON), predictions, axis=1))


def client_reliability(confusion):
  """(1/C) sum_c m_{c,c} (Eq. 7)."""
  return tf.reduce_mean(tf.linalg.diag_part(confusion))
