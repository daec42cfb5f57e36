"""TensorFlow twins of ``scaffold``'s client steps, run inside the clients' training."""

import tensorflow as tf


def step_shift(control, client_control, learning_rate: float) -> list:
  """``scaffold.step_shift``: -lr (c - c_i), added to the weights after every step."""
  return [-learning_rate * (c - ci) for c, ci in zip(control, client_control)]


def client_control_update(client_control, control, initial, trained, steps,
                          learning_rate: float) -> list:
  """``scaffold.client_control_update``; ``steps`` an integer tensor (K)."""
  scale = 1.0 / (tf.cast(tf.maximum(steps, 1), tf.float32) * learning_rate)
  return [ci - c + (x - y) * scale
          for ci, c, x, y in zip(client_control, control, initial, trained)]
