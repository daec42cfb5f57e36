"""Ditto's two readings (``DittoParams.variant``).

'fedefc': FedEFC's code's FedDitto (``util/local_training.py``, ``LocalUpdateDitto``): each
client minimises CE + λ||θ - w^t||² at every step, w^t the received model (fixed in the
round), whose gradient 2λ(θ - w^t) (``ops.ditto.fedefc_proximal_gradient``) is FedProx's
term of strength μ = 2λ (the shared part ``Proximal``); the server is FedAvg's (the
configured aggregator, weighted by the clients' examples) and the global model is the
one scored.

'paper': Li et al. 2021, Algorithm 1, as the authors' code (github litian96/ditto,
``flearn/trainers_MTL/ditto.py``) runs it. The clients train the received w^t on
cross-entropy and the server aggregates as FedAvg (the global update); beside each local
step, on the same batch, the client steps its personal model v_k once
(``parts.PersonalModel``: v_k <- v_k - η(∇F_k(v_k) + λ(v_k - w^t)), η = fl.client_lr,
plain SGD). v_k is the client's state, never sent. Before round 1 ``HeldOutSplit`` holds
out a seeded share of each client's examples as its local test set (``ops.ditto.
held_out_positions``; neither model trains on it: ``DataPlan.kept``); after every round
it scores each personal model on its client's held-out examples (``diagnostics.
PersonalAccuracy``). The server does this from the clients' stored states, a simulation's
shortcut for what a deployed client would measure on its device.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.methods.ditto import parts as ditto_parts
from tff_noisy.methods.ditto.diagnostics import PersonalAccuracy
from tff_noisy.ops import ditto as ditto_ops
from tff_noisy.params import fail

TEST_POSITIONS = 'ditto_test_positions'  # A client's held-out examples (derived).
TRAIN_POSITIONS = 'ditto_train_positions'  # The rest, which it trains on (derived).
_EVAL_BATCH = 1024


def watch_order(model: tf.keras.Model) -> tuple:
  """For each of ``model``'s trainable variables (``ModelWeights`` order), its place among
  the variables a tape watches in an inference pass (their creation order); a
  ConfigError when the pass does not use every trainable variable, when the model has
  regularisation losses, or when it computes otherwise in training mode (dropout,
  BatchNorm): the personal model trains through a frozen copy, which runs in inference
  mode."""
  shape = [2] + [int(d) for d in model.input_shape[1:]]
  x = tf.constant(np.random.default_rng(0).normal(size=shape), model.input.dtype)
  with tf.GradientTape() as tape:
    inference = model(x, training=False)
  watched = [id(v) for v in tape.watched_variables()]
  trainable = [id(v) for v in model.trainable_variables]
  uses = f"method.name ditto with variant 'paper' trains each client's personal model"
  if sorted(watched) != sorted(trainable):
    fail('model.name', f'{uses} by its gradients; model {model.name!r} does not use every '
         'trainable variable in its forward pass', prefix='')
  if model.losses:
    fail('model.name', f'{uses} on the cross-entropy alone; model {model.name!r} adds '
         'regularisation losses of its own, which the global step sees and the personal '
         'step would not', prefix='')
  if not np.allclose(model(x, training=True), inference, rtol=1e-6, atol=1e-6):
    fail('model.name', f'{uses} through a frozen copy of the model, in inference mode; '
         f'model {model.name!r} computes otherwise in training mode (dropout or '
         'BatchNorm): choose one without (mlp, or a norm: group model without dropout)',
         prefix='')
  return tuple(watched.index(i) for i in trainable)


class HeldOutSplit(contract.ServerStep):
  """Each client's local test split before round 1 (recomputed identically on resume) and
  its personal model's accuracy on it after every round."""

  def __init__(self, test_fraction: float, seed: int, names: tuple):
    self.test_fraction = float(test_fraction)
    self.seed = int(seed)
    self.names = tuple(names)
    self._model = self._predict = None

  def prepare(self, server):
    data, store = server.data, server.store
    held = trained = 0
    for index, cid in enumerate(data.client_ids):
      n = len(data.y[cid])
      test = ditto_ops.held_out_positions(n, self.test_fraction, self.seed, index)
      store.set_derived(cid, TEST_POSITIONS, test)
      store.set_derived(cid, TRAIN_POSITIONS, np.setdiff1d(np.arange(n), test))
      held, trained = held + len(test), trained + n - len(test)
    return {'ditto_split': {'test_fraction': self.test_fraction, 'test_examples': held,
                            'train_examples': trained}}

  @staticmethod
  def kept(client_id, store):
    """The client's examples outside its local test split."""
    kept = store.get(client_id, TRAIN_POSITIONS)
    if kept is None:
      raise ValueError(f"client {client_id}: no '{TRAIN_POSITIONS}'; Ditto's prepare "
                       'holds out the local test splits before round 1')
    return kept

  def _logits(self, x):
    return np.concatenate([self._predict(x[i:i + _EVAL_BATCH]).numpy()
                           for i in range(0, len(x), _EVAL_BATCH)])

  def after(self, round_num, state, server):
    del round_num
    if self._model is None:  # Built once, eagerly: the clients' model.
      self._model = server.setup.model_fn()
      self._predict = tf.function(lambda x: self._model(x, training=False),
                                  reduce_retracing=True)
    variables = contract.model_weights_of(self._model)
    for variable, value in zip(variables.non_trainable,
                               server.process.get_model_weights(state).non_trainable):
      variable.assign(value)
    program, data, store = server.process.program, server.data, server.store
    predicted, positions, observed = {}, {}, {}
    for cid in data.client_ids:
      test = store.get(cid, TEST_POSITIONS)
      if test is None or not len(test):
        continue
      personal = store.objective_state(cid, program, data.y[cid])
      if int(personal[ditto_parts.HAS_PERSONAL]) != 1:
        continue  # Not sampled yet: no personal model.
      for variable, name in zip(variables.trainable, self.names):
        variable.assign(personal[name])
      predicted[cid] = np.argmax(self._logits(data.x[cid][test]), axis=-1)
      positions[cid], observed[cid] = test, np.asarray(data.y[cid])[test]
    return state, {'ditto_personal': PersonalAccuracy(predicted, positions, observed)}


def _paper(params, setup) -> contract.Recipe:
  if not setup.client_lr or setup.client_lr <= 0:
    fail('fl.client_lr', "Ditto's personal step needs the client learning rate > 0, got "
         f'{setup.client_lr}', prefix='')
  model = setup.model_fn()
  specs = [tf.TensorSpec(v.shape, v.dtype) for v in model.trainable_variables]
  personal = ditto_parts.PersonalModel(specs, watch_order(model), params.lam, setup.client_lr,
                                       setup.weight_decay)
  split = HeldOutSplit(params.test_fraction, setup.seed, personal.names)
  return contract.Recipe(parts=(contract.CrossEntropy(), personal),
                         data=contract.DataPlan(kept=split.kept), server=(split,))


def ditto(params, setup) -> contract.Recipe:
  if params.variant == 'paper':
    return _paper(params, setup)
  return contract.Recipe(parts=(contract.CrossEntropy(), contract.Proximal(2.0 * params.lam)))
