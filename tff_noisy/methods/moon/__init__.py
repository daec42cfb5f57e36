"""MOON (Li, He & Song 2021): model-contrastive federated learning, each client's
representations pulled towards the received global model's and pushed from its own
previous local model's (with FedDS's aggregation weights: ``methods.combined``)."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
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


_ALGORITHM = 'tff_noisy.methods.moon.algorithm:'
OFF_DEVICE = ("its loss reads the model's penultimate features and two frozen models' "
              '(MOON)')
SPECS = {
    'moon': MethodSpec('MOON (baseline; Li et al. 2021): model-contrastive local term',
                       MoonParams, _ALGORITHM + 'moon', off_device=OFF_DEVICE,
                       display='MOON'),
}
