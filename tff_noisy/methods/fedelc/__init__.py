"""FedELC (Jiang et al., CIKM 2024): logit-adjusted warm-up, the per-class-loss GMM
detection of noisy clients, PENCIL-style end-to-end label correction on them and
FedNoRo's distance-aware aggregation after the detection."""

import dataclasses

from tff_noisy.methods import noisy_clients
from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FedELCParams(Params):
  """FedELC (defaults: the released code's, as FNBench runs it). Rounds 1..warmup_rounds
  warm up on logit-adjusted CE; before round warmup_rounds + 1 every client is probed and
  the GMM vote flags the noisy ones, which then learn their label distributions."""
  warmup_rounds: int = described(20, 'T_w: detection runs before round T_w + 1 (code '
                                 'epoch_of_stage1 = 20).')
  alpha: float = described(0.5, 'α: weight of the compatibility term -log y^d_ŷ (code '
                           'alpha_pencil).')
  beta: float = described(0.2, 'β: weight of the entropy term (code beta_pencil).')
  label_lr: float = described(1000.0, 'λ: plain GD rate of the label logits (code '
                              'lamda_pencil).')
  label_scale: float = described(10.0, 'K: label logits start at K·onehot; the merge '
                                 'rescales by K (code K_pencil).')
  gmm_fits: int = described(9, 'GMM fits (random_state 0..gmm_fits-1) in the detection vote.')

  def check(self, rounds):
    require(self.warmup_rounds >= 1, 'warmup_rounds', 'an integer >= 1', self.warmup_rounds)
    require(self.warmup_rounds < rounds, 'warmup_rounds',
            f'a round before the last (fl.rounds={rounds}): detection runs after it',
            self.warmup_rounds)
    require(self.alpha >= 0, 'alpha', 'a number >= 0', self.alpha)
    require(self.beta >= 0, 'beta', 'a number >= 0', self.beta)
    require(self.label_lr > 0, 'label_lr', 'a number > 0', self.label_lr)
    require(self.label_scale > 0, 'label_scale', 'a number > 0', self.label_scale)
    require(self.gmm_fits >= 1, 'gmm_fits', 'an integer >= 1', self.gmm_fits)
    super().check(rounds)


SPECS = {
    'fedelc': MethodSpec(
        'FedELC: GMM noisy-client detection, end-to-end label correction on noisy clients, '
        'DaAgg aggregation', FedELCParams, 'tff_noisy.methods.fedelc.algorithm:fedelc',
        off_device='its objective trains per-example label logits beside the model',
        report_sections=noisy_clients.SECTIONS, display='FedELC'),
}
