"""FedDyn: the two rules of ``methods.feddyn`` (its ``Params.variant``).

Both average the round's clients unweighted (the recipe's weighting: 1 for each client
with a finite update, 0 for the others), then correct the aggregate after the round:

- ``fedefc`` (FedEFC's released code, ``util/fedavg.py``: the rule behind its Tables
  2-3): θ^t = (1/|P_t|) Σ θ_k^t - μ Σ_{k∈P_t} c_k with the clients' new c_k
  (``ops.feddyn.fedefc_server_step``), over every weight of the model;
- ``paper`` (Acar et al. 2021, Algorithm 1): h^t = h^{t-1} - (α/m) Σ_{k∈P_t}(θ_k^t -
  θ^{t-1}) = h^{t-1} + (1/m) Σ_{k∈P_t} Δg_k, m all the clients, then
  θ^t = (1/|P_t|) Σ θ_k^t - h^t/α on the trainable weights (``ops.feddyn.server_step``);
  h is model-shaped server-only state (the recipe's controller, zero at first).

The aggregate is the configured aggregator's on those weights, stepped by the server
optimiser: with ``fl.server_lr`` 1 and ``fl.aggregator: mean`` (the defaults) it is the
unweighted mean of the θ_k^t, as both sources have it.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.methods.feddyn import parts as feddyn_parts
from tff_noisy.ops import feddyn as feddyn_ops

H_PREFIX = 'feddyn_h'


def equal_weights(round_num, state, client_ids, client_states, server):
  """The weighting: each client with a finite update weighs 1 (a non-finite one, sent as
  zeros with weight 0, stays out), so the aggregate is the clients' unweighted mean."""
  del round_num, state, client_ids, client_states, server

  def weigh(results, global_weights):
    del global_weights
    return [np.float32(float(r.update_weight) > 0) for r in results], {}

  return weigh


def _flat(weights) -> list:
  return [np.asarray(w) for w in tf.nest.flatten(weights)]


def _norm(arrays) -> float:
  return float(np.sqrt(sum(np.sum(np.square(a, dtype=np.float64)) for a in arrays)))


class DriftCorrection(contract.ServerStep):
  """FedEFC's code: θ^t = the unweighted mean - μ Σ_{P_t} c_k after each round."""

  def __init__(self, names, mu: float):
    self.names, self.mu = names, float(mu)
    self.received = None  # θ^{t-1}, from ``before``.

  def before(self, round_num, state, server):
    del round_num
    self.received = server.process.get_model_weights(state)
    return state, {}

  def after(self, round_num, state, server):
    del round_num
    process = server.process
    received, aggregate = _flat(self.received), process.get_model_weights(state)
    mean = _flat(aggregate)
    drifts = [np.asarray(server.outputs[n]) for n in self.names]
    corrected = feddyn_ops.fedefc_server_step(
        received, [m.astype(np.float64) - r for m, r in zip(mean, received)], drifts, self.mu)
    new = tf.nest.pack_sequence_as(aggregate, [c.astype(m.dtype)
                                               for c, m in zip(corrected, mean)])
    return process.set_model_weights(state, new), {
        'feddyn': {'correction_norm': self.mu * _norm(drifts)}}


class DynamicCorrection(contract.ServerStep):
  """Algorithm 1's server: h += Σ_{P_t} Δg_k / m, θ^t = the unweighted mean - h/α."""

  def __init__(self, names, alpha: float):
    self.names, self.alpha = names, float(alpha)
    self.h_names = feddyn_parts.state_names(H_PREFIX, len(names))

  def after(self, round_num, state, server):
    del round_num
    process = server.process
    controller = process.get_controller(state)
    num_clients = len(server.data.client_ids)  # m: every client of the data.
    h = [np.asarray(controller[n], np.float64)
         + np.asarray(server.outputs[g], np.float64) / num_clients
         for n, g in zip(self.h_names, self.names)]
    aggregate = process.get_model_weights(state)
    trainable = [np.asarray(w) for w in aggregate.trainable]
    corrected = [(w.astype(np.float64) - s / self.alpha).astype(w.dtype)
                 for w, s in zip(trainable, h)]
    new = tf.nest.pack_sequence_as(
        aggregate, corrected + [np.asarray(w) for w in aggregate.non_trainable])
    state = process.set_model_weights(state, new)
    state = process.set_controller(state, dict(controller, **{
        n: s.astype(np.float32) for n, s in zip(self.h_names, h)}))
    return state, {'feddyn': {'h_norm': _norm(h)}}


def feddyn(params, setup) -> contract.Recipe:
  """FedDyn as ``params.variant`` says (module doc)."""
  model = setup.model_fn()
  if params.variant == 'fedefc':
    shapes = [v.shape for v in tf.nest.flatten(contract.model_weights_of(model))]
    part = feddyn_parts.DriftSum(shapes)
    return contract.Recipe(parts=(contract.CrossEntropy(), part), weighting=equal_weights,
                           server=(DriftCorrection(part.names, params.mu),))
  shapes = [v.shape for v in model.trainable_variables]
  part = feddyn_parts.DynamicRegulariser(shapes, params.alpha)
  step = DynamicCorrection(part.names, params.alpha)
  return contract.Recipe(
      parts=(contract.CrossEntropy(), part), weighting=equal_weights, server=(step,),
      controller={n: np.zeros(s, np.float32) for n, s in zip(step.h_names, shapes)})
