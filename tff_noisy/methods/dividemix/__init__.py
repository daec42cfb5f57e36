"""DivideMix (Li et al. 2020), uplifted to FL as FNBench runs it: every client trains two
networks, plain cross-entropy in the warm-up rounds, then each network on the clean /
noisy division the other network's loss GMM makes, with MixMatch; both networks
federated."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.dividemix import report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class DivideMixParams(Params):
  """DivideMix's hyper-parameters (Li et al. 2020, Algorithm 1; FNBench's defaults)."""
  warmup_rounds: Optional[int] = described(None, 'T_w: rounds of plain cross-entropy on both '
                                           'networks; null: ⌊0.25·fl.rounds⌋ (FNBench: 30 of '
                                           'its 120 rounds).')
  threshold: float = described(0.5, 'τ: an example is labelled when its clean probability '
                               'w > τ (FNBench: p_threshold 0.5).')
  temperature: float = described(0.5, 'T: the sharpening temperature (FNBench: 0.5).')
  alpha: float = described(4.0, 'α of the MixMatch draw λ ~ Beta(α, α) (FNBench: mm_alpha 4).')
  lambda_u: float = described(25.0, 'λ_u: the unlabelled loss weight, ramped linearly over '
                              '16 rounds after warm-up (FNBench: 25).')
  lambda_r: float = described(1.0, 'λ_r: the uniform-prior regulariser weight (both codes: 1).')

  def warmup(self, rounds: int) -> int:
    """T_w: the configured one, else ⌊0.25·rounds⌋."""
    return int(0.25 * rounds) if self.warmup_rounds is None else int(self.warmup_rounds)

  def check(self, rounds):
    if self.warmup_rounds is not None:
      require(0 <= self.warmup_rounds < rounds, 'warmup_rounds',
              f'a number of rounds in [0, fl.rounds={rounds}) (or null)', self.warmup_rounds)
    require(0 <= self.threshold < 1, 'threshold', 'a number in [0, 1)', self.threshold)
    require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    require(self.alpha > 0, 'alpha', 'a number > 0', self.alpha)
    require(self.lambda_u >= 0, 'lambda_u', 'a number >= 0', self.lambda_u)
    require(self.lambda_r >= 0, 'lambda_r', 'a number >= 0', self.lambda_r)
    super().check(rounds)


SPECS = {
    'dividemix': MethodSpec(
        'DivideMix (baseline; Li et al. 2020): two federated networks, each trained by '
        'MixMatch on the clean/noisy division of the other\'s loss GMM', DivideMixParams,
        'tff_noisy.methods.dividemix.algorithm:dividemix',
        off_device='it trains two networks on a per-client GMM division with MixMatch '
        'mixing within a batch (DivideMix)', report_sections=report.SECTIONS,
        display='DivideMix'),
}
