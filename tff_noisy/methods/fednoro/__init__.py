"""FedNoRo (Wu et al., IJCAI 2023): warm-up on logit-adjusted CE, GMM noisy-client
detection on per-class losses, distillation from the global model on the noisy clients,
distance-aware aggregation (DaAgg)."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods import noisy_clients
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FedNoRoParams(Params):
  """FedNoRo (Wu et al. 2023; defaults: the released code's). Rounds 1..warmup_rounds
  warm up; before round warmup_rounds + 1 every client is probed and the GMM vote flags
  the noisy ones for the rest of training."""
  warmup_rounds: int = described(10, 'T_w: stage 1 rounds; detection runs before round T_w + 1 '
                                 '(code s1 = 10; LSC uses 50).')
  kd_weight: float = described(0.8, 'a: the distillation weight λ ramps up to it (code a).')
  rampup_start: int = described(11, 'Round where λ starts its ramp (code begin = 10, 0-based).')
  rampup_end: int = described(50, 'Round where λ reaches a (code end = 49, 0-based).')
  temperature: float = described(0.8, "T: the teacher's softmax temperature (code 0.8).")
  gmm_fits: int = described(9, 'GMM fits (random_state 0..gmm_fits-1) in the detection vote.')

  def check(self, rounds):
    require(self.warmup_rounds >= 1, 'warmup_rounds', 'an integer >= 1', self.warmup_rounds)
    require(self.warmup_rounds < rounds, 'warmup_rounds',
            f'a round before the last (fl.rounds={rounds}): detection runs after it',
            self.warmup_rounds)
    require(0 <= self.kd_weight <= 1, 'kd_weight', 'a number in [0, 1]', self.kd_weight)
    require(self.rampup_start >= 1, 'rampup_start', 'a round >= 1', self.rampup_start)
    require(self.rampup_end > self.rampup_start, 'rampup_end',
            f'a round after rampup_start={self.rampup_start}', self.rampup_end)
    require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    require(self.gmm_fits >= 1, 'gmm_fits', 'an integer >= 1', self.gmm_fits)
    super().check(rounds)


SPECS = {
    'fednoro': MethodSpec(
        'FedNoRo: logit-adjusted warm-up, GMM noisy-client detection, distillation on noisy '
        'clients, distance-aware aggregation',
        FedNoRoParams, 'tff_noisy.methods.fednoro.algorithm:fednoro',
        off_device='its objective distils from the global model in a prologue (no device '
        'prologue)',
        report_sections=noisy_clients.SECTIONS, display='FedNoRo'),
}
