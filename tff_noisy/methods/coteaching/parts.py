"""Co-teaching's client part: the cross-update loss (``ops.coteaching_tf``) on the
two networks' logits, which the two-network model gives as its features
(``methods.two_networks``); the round's forget rate τ(T) is a server-decided hparam."""

import numpy as np

from tff_noisy.federated.client_parts import ClientPart, Needs
from tff_noisy.ops import coteaching_tf

FORGET_RATE = 'forget_rate'


class CrossUpdateLoss(ClientPart):
  """ℓ_j = (B/n)(m^g_j CE_f,j + m^f_j CE_g,j) on [f's logits, g's logits] features."""

  needs = Needs(features=True)  # Not stackable: the selection ranks a batch's examples.
  hparams = {FORGET_RATE: np.float32(0.0)}

  def __init__(self, num_classes: int):
    self.num_classes = int(num_classes)

  def loss(self, batch, out, ctx):
    return coteaching_tf.cross_update_loss(batch['y'], out.features[:, :self.num_classes],
                                           out.features[:, self.num_classes:],
                                           ctx.hparams[FORGET_RATE])
