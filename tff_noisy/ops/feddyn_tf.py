"""TensorFlow twins of ``feddyn``'s client terms, run inside the clients' training."""

import tensorflow as tf


def penalty(weights, received, gradient_state, alpha: float):
  """``feddyn.penalty``: -<g_k, θ> + (α/2)||θ - θ^{t-1}||², a scalar tensor."""
  return tf.add_n([-tf.reduce_sum(g * w) + 0.5 * alpha * tf.reduce_sum(tf.square(w - r))
                   for w, r, g in zip(weights, received, gradient_state)])


def gradient_terms(weights, received, gradient_state, alpha: float) -> list:
  """``feddyn.gradient_terms``: -g_k + α(θ - θ^{t-1}), added to the loss's gradients."""
  return [-g + alpha * (w - r) for w, r, g in zip(weights, received, gradient_state)]


def client_state_update(gradient_state, received, trained, alpha: float) -> list:
  """``feddyn.client_state_update``: g_k - α(θ_k^t - θ^{t-1})."""
  return [g - alpha * (t - r) for g, r, t in zip(gradient_state, received, trained)]
