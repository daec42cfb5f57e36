"""RFL (Yang et al. 2022, "Robust Federated Learning with Noisy Labels"): class centroids
shared through the server, small-loss selection, agreement of features with the
centroids and global-guided pseudo-labels on the clients."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class RFLParams(Params):
  """RFL (defaults: FNBench's, which runs the released code)."""
  forget_rate: float = described(0.2, "τ: share of each batch's largest losses left out "
                                 '(FNBench forget_rate).')
  gradual_rounds: int = described(30, 'Rounds over which τ rises linearly from 0 (FNBench '
                                  'warmup_epochs = 30; beyond fl.rounds: still rising '
                                  'at the end).')
  pseudo_label_round: int = described(10, "T_pl: from 0-based round T_pl on, disagreeing "
                                      "examples train on the global model's pseudo-label, "
                                      'and λ_cen has ramped up (FNBench T_pl).')
  lambda_cen: float = described(1.0, 'λ_cen: weight of the centroid term after its ramp.')
  lambda_e: float = described(0.8, 'λ_e: weight of the entropy term.')
  centroid_gradient: bool = described(False, "True: the centroid term's gradient reaches "
                                      'the features (the released code detaches them).')

  def check(self, rounds):
    require(0 <= self.forget_rate < 1, 'forget_rate', 'a number in [0, 1)', self.forget_rate)
    require(self.gradual_rounds >= 1, 'gradual_rounds', 'an integer >= 1',
            self.gradual_rounds)
    require(self.pseudo_label_round >= 1, 'pseudo_label_round', 'an integer >= 1',
            self.pseudo_label_round)
    require(self.lambda_cen >= 0, 'lambda_cen', 'a number >= 0', self.lambda_cen)
    require(self.lambda_e >= 0, 'lambda_e', 'a number >= 0', self.lambda_e)
    super().check(rounds)


SPECS = {
    'rfl': MethodSpec(
        'RFL: server class centroids, small-loss selection, feature-centroid agreement and '
        'global pseudo-labels', RFLParams, 'tff_noisy.methods.rfl.algorithm:rfl',
        off_device="its loss reads the model's penultimate features and a frozen copy's "
        'predictions, and it sends its class centroids beside the update', display='RFL'),
}
