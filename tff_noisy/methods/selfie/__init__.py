"""SELFIE (Song et al. 2019), uplifted to FL as FNBench runs it: each client refurbishes the
labels of its examples whose recent predictions agree, and trains on the small-loss ones
and the refurbished ones."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.selfie import report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class SelfieParams(Params):
  """SELFIE's refurbishment (Song et al. 2019, Algorithm 1; FNBench's defaults)."""
  queue_size: int = described(15, 'q: predictions kept per example (FNBench: 15).')
  threshold: float = described(0.05, 'ε: an example whose prediction history has '
                               'normalised entropy <= ε is refurbished (FNBench: 0.05).')
  noise_rate: float = described(0.2, 'τ: the clean set is the ⌈(1 - τ)B⌉ smallest-loss '
                                "examples of a batch (FNBench passes its forget rate, 0.2).")
  warmup_rounds: Optional[int] = described(None, 'T_w: rounds of plain cross-entropy (the '
                                           'history still fills); null: ⌊0.2·fl.rounds⌋ '
                                           '(FNBench).')
  count_empty_slots: bool = described(True, 'Divide the history votes by q, unwritten slots '
                                      'voting class 0 (both codes); false: by the written '
                                      'slots (the paper).')

  def warmup(self, rounds: int) -> int:
    """T_w: the configured one, else ⌊0.2·rounds⌋ (FNBench's ``int(0.2 * epochs)``)."""
    return int(0.2 * rounds) if self.warmup_rounds is None else int(self.warmup_rounds)

  def check(self, rounds):
    require(self.queue_size >= 1, 'queue_size', 'an integer >= 1', self.queue_size)
    require(0 <= self.threshold <= 1, 'threshold', 'a number in [0, 1]', self.threshold)
    require(0 <= self.noise_rate < 1, 'noise_rate', 'a number in [0, 1)', self.noise_rate)
    if self.warmup_rounds is not None:
      require(0 <= self.warmup_rounds < rounds, 'warmup_rounds',
              f'a number of rounds in [0, fl.rounds={rounds}) (or null)', self.warmup_rounds)
    super().check(rounds)


SPECS = {
    'selfie': MethodSpec(
        'SELFIE (baseline; Song et al. 2019): small-loss selection plus labels refurbished '
        'from consistent prediction histories', SelfieParams,
        'tff_noisy.methods.selfie.algorithm:selfie',
        off_device='it keeps a prediction history per example and selects within a batch '
        '(SELFIE)', report_sections=report.SECTIONS, display='SELFIE'),
}
