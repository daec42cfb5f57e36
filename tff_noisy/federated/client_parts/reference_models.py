"""Frozen copies of the model a client's loss reads (MOON's global and previous local
models): the received global model, and the client's own model after its last round,
kept as its state (every variable, checkpointed) with ``has_previous`` 0 until it has
trained once.

At ``start`` the part sets both copies' weights and puts ``x -> (features, logits)`` of
each, in inference mode, in the context under ``GLOBAL`` and ``PREVIOUS``, with
``HAS_PREVIOUS``; at ``finish`` the trained weights become the client's previous model.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts.base import ClientPart, Needs

GLOBAL = 'global'
PREVIOUS = 'previous'
HAS_PREVIOUS = 'has_previous'


class GlobalAndPreviousModels(ClientPart):
  """The two frozen copies; ``specs``: the model's variables in ``ModelWeights`` order
  (trainable, then non-trainable)."""

  needs = Needs(reference_models=(GLOBAL, PREVIOUS))

  def __init__(self, specs):
    self.names = tuple(f'previous_{i}' for i in range(len(specs)))
    self.state_spec = dict(zip(self.names, specs),
                           **{HAS_PREVIOUS: tf.TensorSpec((), tf.int32)})

  def initial_state(self, labels) -> dict:
    del labels
    return {n: np.zeros(s.shape, s.dtype.as_numpy_dtype) for n, s in self.state_spec.items()}

  def start(self, ctx):
    previous = tf.nest.pack_sequence_as(ctx.received, [ctx.state[n] for n in self.names])
    ctx[GLOBAL] = ctx.reference(GLOBAL, ctx.received)
    ctx[PREVIOUS] = ctx.reference(PREVIOUS, previous)
    ctx[HAS_PREVIOUS] = ctx.state[HAS_PREVIOUS]

  def finish(self, ctx):
    ctx.state.update(zip(self.names, [tf.identity(v) for v in tf.nest.flatten(ctx.trained)]))
    ctx.state[HAS_PREVIOUS] = tf.constant(1, tf.int32)
