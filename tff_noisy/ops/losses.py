"""Per-example training losses and the FedProx proximal gradient (pure TensorFlow).

A loss here has the signature ``loss_fn(labels, logits, batch) -> [B] float32``: the
``batch`` mapping carries any per-example inputs a method adds to a client's dataset
(e.g. a transition matrix for forward correction), so the client work stays generic.
"""

import tensorflow as tf


def cross_entropy(labels, logits, batch=None):
  """Softmax cross-entropy from logits, one value per example."""
  del batch
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=logits)


def proximal_gradients(weights, initial_weights, mu):
  """Gradient of the FedProx term (mu/2)||w - w_0||^2 (Li et al. 2020, Eq. 2): mu (w - w_0)."""
  return [mu * (w - w0) for w, w0 in zip(weights, initial_weights)]


LOSSES = {
    'cross_entropy': cross_entropy,
}
