"""SCAFFOLD's control variates as a client part (Karimireddy et al. 2020, Algorithm 1,
option II): every local step is shifted by -lr (c - c_i) after the optimiser, the client
keeps c_i as its state (zero before its first round) and sends Δc_i = c_i+ - c_i.

The server's c arrives with the round's hparams (one entry per trainable variable,
``control_0``, ``control_1``, ...); the server's step c += sum_S(Δc_i) / N is
``ops.scaffold.server_control_update``, a server step of the SCAFFOLD recipe.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts.base import ClientPart
from tff_noisy.ops import scaffold_tf

SHIFT = 'scaffold_shift'  # The context's -lr (c - c_i).


def control_names(count: int) -> tuple:
  """The hparam and state names of the control variates of ``count`` trainable variables."""
  return tuple(f'control_{i}' for i in range(count))


class ControlVariate(ClientPart):
  """SCAFFOLD's corrected steps; ``shapes``: the trainable variables', ``learning_rate``:
  the client optimiser's."""

  def __init__(self, shapes, learning_rate: float):
    if not learning_rate or learning_rate <= 0:
      raise ValueError(f'SCAFFOLD needs the client learning rate > 0, got {learning_rate}')
    self.names = control_names(len(shapes))
    self.shapes = dict(zip(self.names, (tuple(s) for s in shapes)))
    self.state_spec = {n: tf.TensorSpec(s, tf.float32) for n, s in self.shapes.items()}
    self.hparams = self.initial_state(None)
    self.learning_rate = float(learning_rate)

  def initial_state(self, labels) -> dict:
    del labels
    return {n: np.zeros(s, np.float32) for n, s in self.shapes.items()}

  def _values(self, mapping) -> list:
    return [mapping[n] for n in self.names]

  def start(self, ctx):
    ctx[SHIFT] = scaffold_tf.step_shift(self._values(ctx.hparams), self._values(ctx.state),
                                        self.learning_rate)

  def after_step(self, weights, ctx):
    return [w + s for w, s in zip(weights, ctx[SHIFT])]

  def finish(self, ctx):
    old = self._values(ctx.state)
    updated = scaffold_tf.client_control_update(
        old, self._values(ctx.hparams), ctx.received.trainable, ctx.trained.trainable,
        ctx.steps, self.learning_rate)
    ctx.state.update(zip(self.names, updated))
    for name, new, previous in zip(self.names, updated, old):
      ctx.send(name, new - previous)
