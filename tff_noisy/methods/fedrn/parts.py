"""FedRN's client part: the client trains as FedAvg's (cross-entropy, on the examples the
server step keeps) and keeps its trained local model, every weight of it (trainable then
non-trainable, ``ModelWeights`` flattened), with the round it was trained in (hparam
``fedrn_round``; 0 before its first round). The server reads it from the store: its
expertise E_j and its output on the shared noise input after the round, its GMM and its
head for the neighbours it is chosen by before later ones (the code's ``net1``)."""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract

ROUND = 'fedrn_round'
TRAINED_ROUND = 'fedrn_trained_round'


def weight_names(count: int) -> tuple:
  return tuple(f'fedrn_local_{i}' for i in range(count))


class LocalModel(contract.ClientPart):
  """Keeps the client's trained model and its round in its state (module doc)."""

  hparams = {ROUND: np.float32(0.0)}

  def __init__(self, shapes):
    self.names = weight_names(len(shapes))
    self.shapes = dict(zip(self.names, (tuple(s) for s in shapes)))
    self.state_spec = {TRAINED_ROUND: tf.TensorSpec([], tf.float32),
                       **{n: tf.TensorSpec(s, tf.float32) for n, s in self.shapes.items()}}

  def initial_state(self, labels) -> dict:
    del labels
    return {TRAINED_ROUND: np.float32(0.0),
            **{n: np.zeros(s, np.float32) for n, s in self.shapes.items()}}

  def finish(self, ctx):
    trained = [tf.convert_to_tensor(v) for v in tf.nest.flatten(ctx.trained)]
    ctx.state.update(zip(self.names, trained))
    ctx.state[TRAINED_ROUND] = ctx.hparams[ROUND]
