"""FedDyn's client parts (``ops.feddyn`` has the maths).

- ``DriftSum``, FedEFC's code's rule: the client trains as FedAvg's and keeps
  c_k <- c_k + θ^{t-1} - θ_k^t (``feddyn_tf.client_state_update`` with α = 1), over every
  weight of the model (the code's ``state_dict``: trainable and non-trainable), and sends
  its new c_k, so the server receives Σ_{k∈P_t} c_k.
- ``DynamicRegulariser``, Acar et al. 2021, Algorithm 1: each step adds
  -g_k + α(θ - θ^{t-1}) to the loss's gradients; the client keeps
  g_k <- g_k - α(θ_k^t - θ^{t-1}) over the trainable weights and sends its change Δg_k,
  so the server receives Σ_{k∈P_t} Δg_k = -α Σ_{k∈P_t}(θ_k^t - θ^{t-1}).

Both states are zero before a client's first round.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.ops import feddyn_tf


def state_names(prefix: str, count: int) -> tuple:
  return tuple(f'{prefix}_{i}' for i in range(count))


class _ModelShapedState(contract.ClientPart):
  """A per-client state with one entry per weight of ``shapes``, zero at first."""

  prefix = ''

  def __init__(self, shapes):
    self.names = state_names(self.prefix, len(shapes))
    self.shapes = dict(zip(self.names, (tuple(s) for s in shapes)))
    self.state_spec = {n: tf.TensorSpec(s, tf.float32) for n, s in self.shapes.items()}

  def initial_state(self, labels) -> dict:
    del labels
    return {n: np.zeros(s, np.float32) for n, s in self.shapes.items()}

  def _values(self, mapping) -> list:
    return [mapping[n] for n in self.names]


class DriftSum(_ModelShapedState):
  """FedEFC's code's FedDyn client: c_k += θ^{t-1} - θ_k^t, sent whole. ``shapes``: every
  weight of the model, trainable then non-trainable (``ModelWeights`` flattened)."""

  prefix = 'feddyn_drift'

  def finish(self, ctx):
    received = tf.nest.flatten(ctx.received)
    trained = [tf.convert_to_tensor(v) for v in tf.nest.flatten(ctx.trained)]
    updated = feddyn_tf.client_state_update(self._values(ctx.state), received, trained, 1.0)
    ctx.state.update(zip(self.names, updated))
    for name, value in zip(self.names, updated):
      ctx.send(name, value)


class DynamicRegulariser(_ModelShapedState):
  """Algorithm 1's client: the regulariser's gradient at every step, g_k's update, Δg_k
  sent. ``shapes``: the trainable weights'."""

  prefix = 'feddyn_gradient'

  def __init__(self, shapes, alpha: float):
    if not alpha > 0:
      raise ValueError(f'FedDyn needs alpha > 0, got {alpha}')
    super().__init__(shapes)
    self.alpha = float(alpha)

  def step(self, grads, weights, ctx):
    terms = feddyn_tf.gradient_terms(weights, ctx.initial_trainable,
                                     self._values(ctx.state), self.alpha)
    return [g + t for g, t in zip(grads, terms)]

  def finish(self, ctx):
    old = self._values(ctx.state)
    trained = [tf.convert_to_tensor(v) for v in ctx.trained.trainable]
    updated = feddyn_tf.client_state_update(old, list(ctx.received.trainable), trained,
                                            self.alpha)
    ctx.state.update(zip(self.names, updated))
    for name, new, previous in zip(self.names, updated, old):
      ctx.send(name, new - previous)
