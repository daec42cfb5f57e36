"""MOON's client part: the model-contrastive term mu·l_con of its loss CE + mu·l_con (Li,
He & Song 2021, Eq. 4), l_con (Eq. 3, ``ops.moon_tf``) on the penultimate features of the
model being trained, of the received global model and of the client's previous local
model, the two frozen copies the shared part ``client_parts.GlobalAndPreviousModels``
keeps (in inference mode).

Before a client has trained once l_con is 0 (``has_previous`` is 0), as in the authors'
code, whose first round has no previous models (its contrastive logits are the positive
alone, a cross-entropy of 0).
"""

import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.ops import moon_tf


class ModelContrast(contract.ClientPart):
  """mu·l_con against the frozen global and previous local models."""

  needs = contract.Needs(features=True)

  def __init__(self, mu: float, temperature: float):
    if mu <= 0 or temperature <= 0:
      raise ValueError(f'MOON needs mu > 0 and temperature > 0, got mu={mu}, '
                       f'temperature={temperature}')
    self.mu = float(mu)
    self.temperature = float(temperature)

  def loss(self, batch, out, ctx):
    global_features, _ = ctx[contract.GLOBAL](batch['x'])
    previous_features, _ = ctx[contract.PREVIOUS](batch['x'])
    contrast = moon_tf.model_contrastive_loss(out.features, global_features,
                                              previous_features, self.temperature)
    weight = self.mu * tf.cast(ctx[contract.HAS_PREVIOUS], tf.float32)
    return weight * contrast
