"""Co-teaching's client objective: the cross-update loss (``ops.coteaching_tf``) on the
two networks' logits, which the two-network model gives as its features
(``networks``); the round's forget rate τ(T) is a server-decided hparam."""

import numpy as np

from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import coteaching_tf

FORGET_RATE = 'forget_rate'


class CoTeachingObjective(ClientObjective):
  """ℓ_j = (B/n)(m^g_j CE_f,j + m^f_j CE_g,j) on [f's logits, g's logits] features."""

  uses_features = True
  per_example_loss = False  # The selection ranks the examples of a batch.
  hparams = {FORGET_RATE: np.float32(0.0)}

  def __init__(self, num_classes: int):
    super().__init__()
    self.num_classes = int(num_classes)

  def loss(self, batch, logits, features, context, hparams, rows):
    del logits, context, rows
    return coteaching_tf.cross_update_loss(batch['y'], features[:, :self.num_classes],
                                           features[:, self.num_classes:],
                                           hparams[FORGET_RATE])
