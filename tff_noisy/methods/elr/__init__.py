"""Early-Learning Regularization (Liu et al., NeurIPS 2020), uplifted to FL as MaskedOptim's
Table 6 compares it: every client keeps a temporal ensemble of its model's predictions per
example and adds λ·log(1 − ⟨p, t⟩) to the cross-entropy."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class ELRParams(Params):
  """ELR's target momentum β and regulariser weight λ (Liu et al. 2020, Eqs. 7 and 9;
  defaults: the authors' CIFAR-10 config)."""
  beta: float = described(0.7, "β: the targets' momentum, t ← β·t + (1 − β)·p̂ (the "
                          "authors' CIFAR-10 config: 0.7).")
  lambda_elr: float = described(3.0, 'λ: weight of log(1 − ⟨p, t⟩) beside the cross-entropy '
                                "(the authors' CIFAR-10 config: 3).")

  def check(self, rounds):
    require(0 <= self.beta < 1, 'beta', 'a number in [0, 1)', self.beta)
    require(self.lambda_elr >= 0, 'lambda_elr', 'a number >= 0', self.lambda_elr)
    super().check(rounds)


SPECS = {
    'elr': MethodSpec(
        'ELR (baseline; Liu et al. 2020): cross-entropy + λ·log(1 − ⟨p, t⟩) with per-example '
        'targets t a running average of the predictions', ELRParams,
        'tff_noisy.methods.elr.algorithm:elr',
        off_device='it keeps a target per example, updated every step (ELR)',
        display='ELR'),
}
