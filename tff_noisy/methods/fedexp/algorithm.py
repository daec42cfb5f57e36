"""FedExP (Jhunjhunwala et al. 2023, Eqs. 8-10): the clients train as FedAvg's; the
server extrapolates the round's aggregate with

  η_g = max(1, Σ_i p_i ||Δ_i||² / (2(||Δ̄||² + ε))),   θ^t = θ_a + η_g Δ̄,

p_i the clients' update weights normalised (their example counts, as FedExP's and
FNBench's code have it), Δ_i = θ_i - θ_a and Δ̄ the aggregate minus θ_a, θ_a the anchor:
the received θ^{t-1} (``anchor: previous``, the paper) or the initial model θ^0
(``initial``, FNBench's code, the source of MaskedOptim's Table 3; ``ops.fedexp``).

Σ_i p_i ||Δ_i||² is measured where the server sees every update (the recipe's weighting,
which keeps the aggregator's own weights); after the round the server step reads the
aggregate θ^{t-1} + Δ̄_{t-1} (fl.server_lr must be 1: FedExP's η_g is the server's step
size), computes η_g and sets θ^t. Both act on every weight of the model (FNBench's
``state_dict``), as the aggregate does. θ^0 is kept in the recipe's controller (set
before round 1, so a resumed run extrapolates from the same model). Each round records
``eta_g``.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.ops import fedexp as fedexp_ops
from tff_noisy.params import fail

INITIAL_PREFIX = 'fedexp_initial'
HAS_INITIAL = 'fedexp_has_initial'


def _flat(weights) -> list:
  return [np.asarray(w, np.float64) for w in tf.nest.flatten(weights)]


def _squared_norm(arrays) -> float:
  return float(sum(np.sum(np.square(a)) for a in arrays))


def server_learning_rate(optimizer) -> float:
  """The server optimiser's step size (fl.server_lr)."""
  return float(optimizer.get_hparams(optimizer.initialize(
      tf.TensorSpec([], tf.float32)))['learning_rate'])


class Extrapolation(contract.ServerStep):
  """The anchor before each round, Σ p_i ||Δ_i||² from the clients' updates (called as
  the recipe's weighting), η_g and θ^t after it."""

  def __init__(self, anchor: str, epsilon: float, initial_names=()):
    self.anchor, self.epsilon = anchor, float(epsilon)
    self.initial_names = tuple(initial_names)
    self.received = None  # θ^{t-1} (``before``).
    self.mean_squared_norm = None  # Σ p_i ||Δ_i||² of the round (the weighting).

  def prepare(self, server) -> dict:
    lr = server_learning_rate(server.setup.server_optimizer)
    if lr != 1.0:
      fail('server_lr', f'FedExP sets the server step size itself (η_g): needs 1, got {lr}',
           prefix='fl.')
    return {}

  def _initial(self, state, process) -> list:
    controller = process.get_controller(state)
    return [np.asarray(controller[n], np.float64) for n in self.initial_names]

  def before(self, round_num, state, server):
    del round_num
    process = server.process
    self.received, self.mean_squared_norm = process.get_model_weights(state), None
    if self.anchor == 'initial' and not int(process.get_controller(state)[HAS_INITIAL]):
      state = process.set_controller(state, dict(
          zip(self.initial_names, tf.nest.flatten(self.received)), **{HAS_INITIAL: 1}))
    return state, {}

  def __call__(self, round_num, state, client_ids, client_states, server):
    """The recipe's weighting: the clients' own weights, Σ p_i ||Δ_i||² noted."""
    del round_num, client_ids, client_states
    offset = None
    if self.anchor == 'initial':  # D = θ^{t-1} - θ^0: θ_i - θ^0 = D + (θ_i - θ^{t-1}).
      offset = [r - i for r, i in zip(_flat(self.received),
                                      self._initial(state, server.process))]

    def weigh(results, global_weights):
      del global_weights
      weights = [float(r.update_weight) for r in results]
      total, weighted = sum(weights), 0.0
      for result, weight in zip(results, weights):
        if weight <= 0:  # A non-finite update (sent as zeros with weight 0).
          continue
        delta = [-u for u in _flat(result.update)]  # The update is θ^{t-1} - θ_i.
        squared, _ = fedexp_ops.update_statistics([delta])
        if offset is not None:
          squared, _ = fedexp_ops.reanchor(squared, delta, offset)
        weighted += weight * squared
      self.mean_squared_norm = weighted / total if total > 0 else None
      return weights, {}

    return weigh

  def after(self, round_num, state, server):
    del round_num
    process = server.process
    if self.mean_squared_norm is None:  # No finite update: the model did not move.
      return state, {'eta_g': None}
    aggregate = process.get_model_weights(state)
    anchor = (_flat(self.received) if self.anchor == 'previous'
              else self._initial(state, process))
    flat = tf.nest.flatten(aggregate)
    mean = [np.asarray(a, np.float64) - z for a, z in zip(flat, anchor)]
    squared_mean = _squared_norm(mean)
    eta = fedexp_ops.step_size(self.mean_squared_norm, squared_mean, self.epsilon)
    new = [(z + eta * d).astype(np.asarray(a).dtype) for z, d, a in zip(anchor, mean, flat)]
    state = process.set_model_weights(state, tf.nest.pack_sequence_as(aggregate, new))
    return state, {'eta_g': eta, 'fedexp': {
        'mean_squared_norm': self.mean_squared_norm, 'squared_norm_of_mean': squared_mean}}


def fedexp(params, setup) -> contract.Recipe:
  """FedAvg clients, the extrapolated server step (module doc)."""
  controller, names = {}, ()
  if params.anchor == 'initial':
    weights = tf.nest.flatten(contract.model_weights_of(setup.model_fn()))
    names = tuple(f'{INITIAL_PREFIX}_{i}' for i in range(len(weights)))
    controller = {n: np.zeros(w.shape, w.dtype.as_numpy_dtype)
                  for n, w in zip(names, weights)}
    controller[HAS_INITIAL] = np.int32(0)
  step = Extrapolation(params.anchor, params.epsilon, names)
  return contract.Recipe(weighting=step, server=(step,), controller=controller)
