"""Joint Optimization (Tanaka et al. 2018), uplifted to FL as FNBench runs it: each client
trains on per-example soft labels that its model's averaged recent predictions rewrite."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.joint_optim import report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class JointOptimParams(Params):
  """Joint Optimization's loss and label updates (Tanaka et al. 2018; FNBench's defaults)."""
  alpha: float = described(1.2, 'α: weight of the prior term L_p (FNBench: 1.2).')
  beta: float = described(0.8, 'β: weight of the entropy term L_e (FNBench: 0.8).')
  queue_size: int = described(15, 'q: softmax outputs kept per example; a label becomes '
                              'their mean (FNBench: 15).')
  warmup_rounds: Optional[int] = described(None, 'T_w: rounds without label updates (the '
                                           'history still fills); null: ⌊0.2·fl.rounds⌋ '
                                           '(FNBench).')
  labeling: str = described('soft', "'soft' (the mean output) or 'hard' (its one-hot "
                            'argmax) labels (FNBench: soft).')
  divide_by_filled: bool = described(False, 'Average over the written slots; false: divide '
                                     'by q, unwritten slots 0 (both codes).')

  def warmup(self, rounds: int) -> int:
    """T_w: the configured one, else ⌊0.2·rounds⌋ (FNBench's ``int(0.2 * epochs)``)."""
    return int(0.2 * rounds) if self.warmup_rounds is None else int(self.warmup_rounds)

  def check(self, rounds):
    require(self.alpha >= 0, 'alpha', 'a number >= 0', self.alpha)
    require(self.beta >= 0, 'beta', 'a number >= 0', self.beta)
    require(self.queue_size >= 1, 'queue_size', 'an integer >= 1', self.queue_size)
    if self.warmup_rounds is not None:
      require(0 <= self.warmup_rounds < rounds, 'warmup_rounds',
              f'a number of rounds in [0, fl.rounds={rounds}) (or null)', self.warmup_rounds)
    require(self.labeling in ('soft', 'hard'), 'labeling', "'soft' or 'hard'", self.labeling)
    super().check(rounds)


SPECS = {
    'joint_optim': MethodSpec(
        'Joint Optimization (baseline; Tanaka et al. 2018): soft labels rewritten from '
        'averaged predictions, with prior and entropy terms', JointOptimParams,
        'tff_noisy.methods.joint_optim.algorithm:joint_optim',
        off_device='it keeps soft labels and an output history per example and its prior '
        'term couples a batch (Joint Optimization)', report_sections=report.SECTIONS,
        display='JointOptim'),
}
