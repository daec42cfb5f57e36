"""Per-example training losses and the FedProx proximal gradient (pure TensorFlow).

Client parts (``tff_noisy.federated.client_parts``) compose these into the
per-example loss ``[B]`` that the client work trains on.
"""

import tensorflow as tf


def cross_entropy(labels, logits):
  """Softmax cross-entropy from logits, one value per example."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=logits)


def proximal_gradients(weights, initial_weights, mu):
  """Gradient of the FedProx term (mu/2)||w - w_0||^2 (Li et al. 2020, Eq. 2): mu (w - w_0)."""
  return [mu * (w - w0) for w, w0 in zip(weights, initial_weights)]


def forward_corrected_cross_entropy(labels, logits, matrix):
  """-log((Q softmax(z))_y + 1e-12) per example (FedEFC Eqs. 14-16; Patrini et al. 2017).

  ``matrix`` [C, C] is Q[i, j] = p(noisy i | true j) (``ops.transition``), a per-round
  constant: no gradient flows into it.
  """
  noisy = tf.matmul(tf.nn.softmax(logits), tf.stop_gradient(tf.cast(matrix, logits.dtype)),
                    transpose_b=True)
  picked = tf.gather(noisy, tf.cast(labels, tf.int32), batch_dims=1)
  return -tf.math.log(picked + 1e-12)
