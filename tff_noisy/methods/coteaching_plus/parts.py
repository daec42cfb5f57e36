"""Co-teaching+'s client part: the cross-update loss of ``ops.coteaching_plus_tf`` on the two
networks' logits, which the two-network model gives as its features
(``methods.two_networks``); the round's forget rate τ(T) and whether it is past the plain
Co-teaching rounds are server-decided hparams."""

import numpy as np

from tff_noisy.methods import contract
from tff_noisy.ops import coteaching_plus_tf

FORGET_RATE = 'forget_rate'
DISAGREEMENT = 'disagreement'


class CrossUpdatePlusLoss(contract.ClientPart):
  """ℓ_j = (B/n)(m^g_j CE_f,j + m^f_j CE_g,j), the masks chosen in the disagreement set once
  the hparam ``disagreement`` is 1 (Co-teaching's on the whole batch before)."""

  needs = contract.Needs(features=True)  # Not stackable: the selection ranks a batch.
  hparams = {FORGET_RATE: np.float32(0.0), DISAGREEMENT: np.float32(0.0)}

  def __init__(self, num_classes: int, on_probabilities: bool = True,
               none_kept: str = 'skip'):
    self.num_classes = int(num_classes)
    self.on_probabilities = bool(on_probabilities)
    self.none_kept = str(none_kept)

  def loss(self, batch, out, ctx):
    return coteaching_plus_tf.cross_update_loss(
        batch['y'], out.features[:, :self.num_classes], out.features[:, self.num_classes:],
        ctx.hparams[FORGET_RATE], ctx.hparams[DISAGREEMENT],
        on_probabilities=self.on_probabilities, none_kept=self.none_kept)
