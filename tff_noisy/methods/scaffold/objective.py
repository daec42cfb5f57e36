"""SCAFFOLD's client objective: cross-entropy steps shifted by -lr (c - c_i), the client's
control variate c_i kept as its state, Δc_i sent beside the update (``ops.scaffold``).

The server's control variate c arrives with the round's hparams (one entry per
trainable variable, broadcast like any server-decided value), c_i is the client's state
(checkpointed; zero before its first round), and Δc_i = c_i+ - c_i is the objective's
client output, summed over the round's clients for the server's step.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import scaffold_tf

SHIFT = 'scaffold_shift'  # The context's -lr (c - c_i).


class ControlVariateObjective(ClientObjective):
  """Cross-entropy with SCAFFOLD's corrected local steps (Karimireddy et al. 2020, Alg. 1,
  option II); ``shapes``: the trainable variables', ``learning_rate``: the client's."""

  def __init__(self, shapes, learning_rate: float):
    super().__init__()
    if not learning_rate or learning_rate <= 0:
      raise ValueError(f'SCAFFOLD needs the client learning rate > 0, got {learning_rate}')
    self.names = tuple(f'control_{i}' for i in range(len(shapes)))
    self.shapes = dict(zip(self.names, (tuple(s) for s in shapes)))
    self.state_spec = {n: tf.TensorSpec(s, tf.float32) for n, s in self.shapes.items()}
    self.hparams = self.initial_state(None)
    self.learning_rate = float(learning_rate)

  def initial_state(self, labels) -> dict:
    del labels
    return {n: np.zeros(s, np.float32) for n, s in self.shapes.items()}

  def _values(self, mapping) -> list:
    return [mapping[n] for n in self.names]

  def prologue(self, predict, dataset, state, hparams) -> dict:
    del predict, dataset
    return {SHIFT: scaffold_tf.step_shift(self._values(hparams), self._values(state),
                                          self.learning_rate)}

  def step_shift(self, context, hparams):
    del hparams
    return context[SHIFT]

  def trained_state(self, state, context, initial, trained, steps, hparams):
    del context
    updated = scaffold_tf.client_control_update(
        self._values(state), self._values(hparams), initial.trainable, trained.trainable,
        steps, self.learning_rate)
    return dict(state, **dict(zip(self.names, updated)))

  def client_outputs(self, old_state, new_state, hparams) -> dict:
    del hparams
    return {n: new_state[n] - old_state[n] for n in self.names}
