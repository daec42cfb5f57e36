"""LogitClip (Wei et al. 2023): FedAvg whose clients train on the cross-entropy of their
logits clipped to p-norm at most tau (``ops.baseline_losses.clip_logits``), uplifted to
FL as LSC's Table 2 does (tau = 1.0). Its clients stack and train on devices."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class LogitClipParams(Params):
  """LogitClip's clipping ball (Wei et al. 2023; LSC's appendix: tau = 1.0 everywhere)."""
  tau: float = described(1.0, 'Upper bound of the logit vector norm (LSC Table 2: 1.0).')
  p: float = described(2.0, 'The p of the p-norm, >= 1 (Wei et al.: 2).')

  def check(self, rounds):
    require(self.tau > 0, 'tau', 'a number > 0', self.tau)
    require(self.p >= 1, 'p', 'a number >= 1', self.p)
    super().check(rounds)


SPECS = {
    'logitclip': MethodSpec('LogitClip (baseline; Wei et al. 2023): cross-entropy on '
                            'norm-clipped logits', LogitClipParams,
                            'tff_noisy.methods.logitclip.algorithm:logitclip',
                            display='LogitClip'),
}
