"""MOON (Li, He & Song 2021): model-contrastive federated learning, each client's
representations pulled towards the received global model's and pushed from its own
previous local model's; alone and with FedDS's aggregation weights (FedDS Table 4)."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.fedds import FedDSParams
from tff_noisy.methods.fedds import report as fedds_report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class MoonParams(Params):
  """MOON's loss CE + mu·l_con (Eq. 4); FedDS does not state its values."""
  mu: float = described(5.0, 'Weight of the model-contrastive term (MOON: 5 on CIFAR-10, 1 '
                        'on CIFAR-100).')
  temperature: float = described(0.5, 'T of the cosine similarities (MOON: 0.5).')

  def check(self, rounds):
    require(self.mu > 0, 'mu', 'a number > 0 (MOON)', self.mu)
    require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class FedDSMoonParams(FedDSParams, MoonParams):
  """FedDS weighting over MOON local training."""


_ALGORITHM = 'tff_noisy.methods.moon.algorithm:'
_OFF_DEVICE = ("its loss reads the model's penultimate features and two frozen models' "
               '(MOON)')
SPECS = {
    'moon': MethodSpec('MOON (baseline; Li et al. 2021): model-contrastive local term',
                       MoonParams, _ALGORITHM + 'Moon', off_device=_OFF_DEVICE,
                       display='MOON'),
    'fedds_moon': MethodSpec('FedDS over MOON local training (FedDS Table 4)',
                             FedDSMoonParams, _ALGORITHM + 'FedDSMoon',
                             needs_public_split=True, off_device=_OFF_DEVICE,
                             report_sections=fedds_report.SECTIONS,
                             display='MOON + FedDS'),
}
