"""MaskedOptim (docs/papers/maskedoptim.md): GMM detection of noisy clients after a warm-up,
then masked end-to-end label correction on them."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods import noisy_clients
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class MaskedOptimParams(Params):
  """MaskedOptim (the paper's §4; docs/papers/maskedoptim.md). Rounds 1..warmup_rounds
  warm up on logit-adjusted CE; before round warmup_rounds + 1 every client is probed and the GMM
  vote flags the noisy ones for the rest of training. Configs set
  ``fl.aggregator: geometric_median_per_tensor`` (the paper's aggregation)."""
  warmup_rounds: int = described(30, 'T_w: detection runs before round T_w + 1 (paper, code 30; '
                                 'code_v1 20).')
  alpha: float = described(0.5, 'Weight of the compatibility term -log y^d_ŷ.')
  beta: Optional[float] = described(None, 'Weight of the entropy term; null: 0.1 (paper, code), '
                                    '0.2 (code_v1).')
  tau: float = described(0.8, "Share of a batch's smallest-loss samples the mask keeps (paper, "
                         'code).')
  label_lr: float = described(1000.0, 'η: plain GD rate of the label logits (batch-mean gradient).')
  label_scale: float = described(10.0, 'K: label logits start at K·onehot; the merge rescales by '
                                 'K.')
  zeta: float = described(0.8, "Pre-merge ζ (Eq. 16): a noisy client's update is scaled by ζ.")
  mask: bool = described(True, "False: the no-mask ablation (every sample's m = 1).")
  loss_variant: str = described('paper', "'paper' (Eqs. 9-14), 'code' (the released code at "
                                "a8e8e55) or 'code_v1' (its first commit: LogitClip, argmax "
                                'mask).')
  logit_clip: float = described(1.0, 'τ_c of LogitClip (code_v1 only).')
  gmm_fits: int = described(9, 'GMM fits (random_state 0..gmm_fits-1) in the detection vote.')

  def beta_value(self) -> float:
    """β: the configured one, else the variant's default."""
    if self.beta is not None:
      return float(self.beta)
    return 0.2 if self.loss_variant == 'code_v1' else 0.1

  def check(self, rounds):
    require(self.warmup_rounds >= 1, 'warmup_rounds', 'an integer >= 1',
             self.warmup_rounds)
    require(self.warmup_rounds < rounds, 'warmup_rounds',
             f'a round before the last (fl.rounds={rounds}): detection runs after it',
             self.warmup_rounds)
    require(self.alpha >= 0, 'alpha', 'a number >= 0', self.alpha)
    if self.beta is not None:
      require(self.beta >= 0, 'beta', 'a number >= 0 (or null for the default)', self.beta)
    require(0 < self.tau <= 1, 'tau', 'a share in (0, 1]', self.tau)
    require(self.label_lr > 0, 'label_lr', 'a number > 0', self.label_lr)
    require(self.label_scale > 0, 'label_scale', 'a number > 0', self.label_scale)
    require(0 < self.zeta <= 1, 'zeta', 'a number in (0, 1]', self.zeta)
    require(self.loss_variant in ('paper', 'code', 'code_v1'), 'loss_variant',
             "'paper', 'code' or 'code_v1'", self.loss_variant)
    require(self.logit_clip > 0, 'logit_clip', 'a number > 0', self.logit_clip)
    require(self.gmm_fits >= 1, 'gmm_fits', 'an integer >= 1', self.gmm_fits)
    super().check(rounds)


SPECS = {
    'maskedoptim': MethodSpec(
        'MaskedOptim: GMM noisy-client detection, masked end-to-end label correction',
        MaskedOptimParams, 'tff_noisy.methods.maskedoptim.algorithm:maskedoptim',
        off_device='its objective trains per-example label logits beside the model',
        report_sections=noisy_clients.SECTIONS, display='MaskedOptim'),
}
