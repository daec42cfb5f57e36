"""Ditto's personal model as a client part (Li et al. 2021, Algorithm 1, the personal
update v_k <- v_k - η(∇F_k(v_k) + λ(v_k - w^t)), ``ops.ditto_tf.personal_step``).

The personal model is a frozen copy of the model (``Needs.reference_models``) whose
variables hold v_k during the client's round: at ``start`` they take the client's kept
v_k (the received w^t on its first round); ``loss`` adds no term and keeps the step's
batch; ``after_step`` takes one plain-SGD step of v_k on that batch with its own tape
(F_k: the batch's mean cross-entropy, plus ``fl.weight_decay``'s coupled L2 when set, the
objective the global step minimises) and leaves the global model's weights as they are;
``finish`` keeps v_k as the client's state. The copy runs in inference mode, so the model
must compute the same in both modes (no dropout, no BatchNorm: ``algorithm`` checks).
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.ops import ditto_tf
from tff_noisy.ops import losses

PERSONAL = 'ditto_personal'  # The frozen copy that holds v_k.
HAS_PERSONAL = 'ditto_has_personal'  # 1 once the client has trained its v_k.
_APPLY, _VARIABLES, _X, _Y = ('ditto_apply', 'ditto_variables', 'ditto_x', 'ditto_y')


def personal_names(count: int) -> tuple:
  """The state names of v_k's ``count`` trainable variables, in ``ModelWeights`` order."""
  return tuple(f'{PERSONAL}_{i}' for i in range(count))


class PersonalModel(contract.ClientPart):
  """v_k beside the global model's training.

  ``specs``: the trainable variables' ``tf.TensorSpec`` s (``ModelWeights`` order);
  ``creation_order``: for each trainable variable, its place among the copy's variables
  as a tape watches them (creation order; ``algorithm.watch_order``); ``lam``: λ;
  ``learning_rate``: η (fl.client_lr); ``weight_decay``: fl.weight_decay.
  """

  needs = contract.Needs(reference_models=(PERSONAL,))

  def __init__(self, specs, creation_order, lam: float, learning_rate: float,
               weight_decay: float = 0.0):
    if not lam > 0 or not learning_rate or learning_rate <= 0:
      raise ValueError(f'Ditto needs lambda > 0 and a client learning rate > 0, got '
                       f'lambda={lam}, learning rate={learning_rate}')
    self.names = personal_names(len(specs))
    self.shapes = [tuple(s.shape) for s in specs]
    if sorted(creation_order) != list(range(len(specs))):
      raise ValueError(f'creation_order {creation_order} is not a permutation of the '
                       f'{len(specs)} trainable variables')
    self.creation_order = tuple(int(i) for i in creation_order)
    self.state_spec = dict(zip(self.names, (tf.TensorSpec(s.shape, tf.float32)
                                            for s in specs)),
                           **{HAS_PERSONAL: tf.TensorSpec((), tf.int32)})
    self.lam = float(lam)
    self.learning_rate = float(learning_rate)
    self.weight_decay = float(weight_decay)

  def initial_state(self, labels) -> dict:
    del labels
    state = {n: np.zeros(s, np.float32) for n, s in zip(self.names, self.shapes)}
    state[HAS_PERSONAL] = np.int32(0)
    return state

  def start(self, ctx):
    has = ctx.state[HAS_PERSONAL] > 0
    personal = [tf.where(has, ctx.state[n], w)
                for n, w in zip(self.names, ctx.received.trainable)]
    weights = tf.nest.pack_sequence_as(
        ctx.received, personal + list(tf.nest.flatten(ctx.received.non_trainable)))
    apply = ctx.reference(PERSONAL, weights)
    spec = ctx.dataset.element_spec['x']
    with tf.GradientTape() as tape:  # Finds the copy's trainable variables.
      apply(tf.zeros([1] + spec.shape.as_list()[1:], spec.dtype))
    watched = tape.watched_variables()
    if len(watched) != len(self.names):
      raise ValueError(f'the personal copy has {len(watched)} trainable variables in use, '
                       f'the model {len(self.names)}')
    variables = [watched[i] for i in self.creation_order]
    for variable, shape in zip(variables, self.shapes):
      if tuple(variable.shape) != shape:
        raise ValueError(f'personal variable {variable.name} has shape '
                         f'{tuple(variable.shape)}, the model {shape}')
    ctx[_APPLY], ctx[_VARIABLES] = apply, variables

  def loss(self, batch, out, ctx):
    del out
    ctx[_X], ctx[_Y] = batch['x'], batch['y']

  def after_step(self, weights, ctx):
    variables = ctx[_VARIABLES]
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      tape.watch(variables)
      _, logits = ctx[_APPLY](ctx[_X])
      loss = tf.reduce_mean(losses.cross_entropy(ctx[_Y], logits))
    grads = tape.gradient(loss, variables)
    values = [tf.identity(v) for v in variables]
    if self.weight_decay:
      grads = [g + self.weight_decay * v for g, v in zip(grads, values)]
    updated = ditto_tf.personal_step(values, grads, list(ctx.initial_trainable), self.lam,
                                     self.learning_rate)
    for variable, value in zip(variables, updated):
      variable.assign(value)
    return weights

  def finish(self, ctx):
    ctx.state.update(zip(self.names, [tf.identity(v) for v in ctx[_VARIABLES]]))
    ctx.state[HAS_PERSONAL] = tf.constant(1, tf.int32)
