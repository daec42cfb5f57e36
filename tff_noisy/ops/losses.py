"""Per-example training losses and the FedProx proximal gradient (pure TensorFlow).

Client objectives (``tff_noisy.federated.objectives``) compose these into the
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
