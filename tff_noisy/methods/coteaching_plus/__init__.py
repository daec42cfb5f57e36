"""Co-teaching+ (Yu et al. 2019), uplifted to FL as FNBench runs it: every client trains two
networks, plain Co-teaching for the first rounds, then small-loss cross-selection within
the examples the two networks disagree on; both networks federated."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class CoTeachingPlusParams(Params):
  """Co-teaching+'s schedule (Yu et al. 2019, Algorithm 1; FNBench's defaults)."""
  forget_rate: float = described(0.2, 'τ: the share of the selection left out (FNBench: 0.2).')
  gradual_rounds: Optional[int] = described(None, 'T_k: rounds over which the forget rate '
                                            'rises from 0 to τ; null: ⌊0.2·fl.rounds⌋ '
                                            "(FNBench's warm-up; 0: τ from round 1).")
  exponent: float = described(1.0, "c of the authors' code: the ramp ends at τ^c.")
  init_epoch: int = described(10, 'Rounds of plain Co-teaching before the disagreement step '
                              "(the authors' and FNBench's init_epoch 10).")
  on_probabilities: bool = described(True, 'Disagreement phase: cross-entropy of the softmax '
                                     "outputs taken as logits (both codes); false: of the "
                                     'logits (the paper).')
  none_kept: str = described('skip', "A disagreement set too small to keep one example: "
                             "'skip' (loss 0, FNBench) or 'all' (keep all of it, the "
                             "authors' code).")

  def gradual(self, rounds: int) -> int:
    """T_k: the configured one, else ⌊0.2·rounds⌋ (FNBench's ``int(0.2 * epochs)``)."""
    return int(0.2 * rounds) if self.gradual_rounds is None else int(self.gradual_rounds)

  def check(self, rounds):
    require(0 <= self.forget_rate < 1, 'forget_rate', 'a number in [0, 1)', self.forget_rate)
    if self.gradual_rounds is not None:
      require(0 <= self.gradual_rounds <= rounds, 'gradual_rounds',
              f'a number of rounds in [0, fl.rounds={rounds}] (or null)', self.gradual_rounds)
    require(self.exponent > 0, 'exponent', 'a number > 0', self.exponent)
    require(0 <= self.init_epoch < rounds, 'init_epoch',
            f'a number of rounds in [0, fl.rounds={rounds})', self.init_epoch)
    require(self.none_kept in ('skip', 'all'), 'none_kept', "'skip' or 'all'", self.none_kept)
    super().check(rounds)


SPECS = {
    'coteaching_plus': MethodSpec(
        'Co-teaching+ (baseline; Yu et al. 2019): two federated networks, small-loss '
        'cross-selection on their disagreement', CoTeachingPlusParams,
        'tff_noisy.methods.coteaching_plus.algorithm:coteaching_plus',
        off_device='it trains two networks with a selection coupling the examples of a '
        'batch (Co-teaching+)', display='Co-teaching+'),
}
