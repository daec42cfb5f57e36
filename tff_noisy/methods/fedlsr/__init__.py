"""FedLSR (Jiang et al., CIKM 2022): local self-regularisation, each client training on
two views of its batches with a sharpened MixUp prediction, self distillation between the
views and an entropy term."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FedLSRParams(Params):
  """FedLSR (defaults: FNBench's ``LocalUpdateFedLSR``)."""
  gamma: float = described(0.4, 'γ: the self-distillation weight after the warm-up (FNBench '
                           'gamma).')
  gamma_e: float = described(0.3, 'γ_e: the entropy weight (FNBench gamma_e; the notebook '
                             '0.6).')
  warmup_ratio: float = described(0.2, 't_w / fl.rounds: γ(t) ramps linearly from 0 over '
                                  't_w rounds (FNBench warm_up_ratio_lsr).')
  distill_t: float = described(3.0, '1/T_d: the logits are multiplied by it in the '
                               'distillation (FNBench distill_t).')
  variant: str = described('code', "'code' (FNBench: CE of the re-softmaxed sharpened "
                           "mixture, JS/C, H(softmax(q1))) or 'plain' (the paper's terms).")

  def check(self, rounds):
    require(self.gamma >= 0, 'gamma', 'a number >= 0', self.gamma)
    require(self.gamma_e >= 0, 'gamma_e', 'a number >= 0', self.gamma_e)
    require(0 <= self.warmup_ratio <= 1, 'warmup_ratio', 'a share in [0, 1]',
            self.warmup_ratio)
    require(self.distill_t > 0, 'distill_t', 'a number > 0', self.distill_t)
    require(self.variant in ('code', 'plain'), 'variant', "'code' or 'plain'", self.variant)
    super().check(rounds)


SPECS = {
    'fedlsr': MethodSpec(
        'FedLSR: local self-regularisation (two views, sharpened MixUp prediction, self '
        'distillation, entropy)', FedLSRParams, 'tff_noisy.methods.fedlsr.algorithm:fedlsr',
        off_device="its batches hold a second, augmented view and its loss couples each "
        "example's two views", display='FedLSR'),
}
