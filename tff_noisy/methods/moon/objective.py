"""MOON's client objective: CE + mu·l_con (Li, He & Song 2021, Eq. 4), l_con (Eq. 3,
``ops.moon_tf``) on the penultimate features of the model being trained, of the received
global model and of the client's previous local model, the two last frozen copies
(``reference_models``) in inference mode.

The previous local model is the client's state: every variable of its model after its
last round (checkpointed), with ``has_previous`` 0 until it has trained once. Before
that l_con is 0, as in the authors' code, whose first round has no previous models
(its contrastive logits are the positive alone, a cross-entropy of 0).
"""

import numpy as np
import tensorflow as tf

from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import losses
from tff_noisy.ops import moon_tf

GLOBAL = 'global'
PREVIOUS = 'previous'
HAS_PREVIOUS = 'has_previous'


class ModelContrastiveObjective(ClientObjective):
  """CE + mu·l_con against the frozen global and previous local models; ``specs``: the
  model's variables in ``ModelWeights`` order (trainable, then non-trainable)."""

  uses_features = True
  per_example_loss = True  # l_con of an example reads that example's representations.
  reference_models = (GLOBAL, PREVIOUS)

  def __init__(self, specs, mu: float, temperature: float):
    super().__init__()
    if mu <= 0 or temperature <= 0:
      raise ValueError(f'MOON needs mu > 0 and temperature > 0, got mu={mu}, '
                       f'temperature={temperature}')
    self.names = tuple(f'previous_{i}' for i in range(len(specs)))
    self.state_spec = dict(zip(self.names, specs), **{HAS_PREVIOUS: tf.TensorSpec((), tf.int32)})
    self.mu = float(mu)
    self.temperature = float(temperature)

  def initial_state(self, labels) -> dict:
    del labels
    return {n: np.zeros(s.shape, s.dtype.as_numpy_dtype) for n, s in self.state_spec.items()}

  def reference_weights(self, received, state, hparams) -> dict:
    del hparams
    previous = tf.nest.pack_sequence_as(received, [state[n] for n in self.names])
    return {GLOBAL: received, PREVIOUS: previous}

  def loss(self, batch, logits, features, context, hparams, rows):
    del hparams, rows
    global_features, _ = context[GLOBAL](batch['x'])
    previous_features, _ = context[PREVIOUS](batch['x'])
    contrast = moon_tf.model_contrastive_loss(features, global_features, previous_features,
                                              self.temperature)
    weight = self.mu * tf.cast(context[HAS_PREVIOUS], tf.float32)
    return losses.cross_entropy(batch['y'], logits) + weight * contrast

  def prologue(self, predict, dataset, state, hparams) -> dict:
    del predict, dataset, hparams
    return {HAS_PREVIOUS: state[HAS_PREVIOUS]}

  def trained_state(self, state, context, initial, trained, steps, hparams):
    del state, context, initial, steps, hparams
    return dict(zip(self.names, [tf.identity(v) for v in tf.nest.flatten(trained)]),
                **{HAS_PREVIOUS: tf.constant(1, tf.int32)})
