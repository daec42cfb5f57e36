"""FedDyn (Acar et al. 2021): federated learning with dynamic regularisation, and the
rule FedEFC's released code runs under that name (the default: the one behind FedEFC's
Tables 2-3)."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require

VARIANTS = ('fedefc', 'paper')


@dataclasses.dataclass(frozen=True)
class FedDynParams(Params):
  """Which FedDyn, and its strength."""
  variant: str = described('fedefc', "'fedefc': FedEFC's code (plain clients, the server "
                           "subtracts mu·Σ c_k); 'paper': Acar et al. 2021, Algorithm 1.")
  mu: float = described(1e-5, "'fedefc': weight of the clients' summed drifts c_k (FedEFC's "
                        'code: 1e-5).')
  alpha: float = described(0.01, "'paper': α of the dynamic regulariser (Acar et al.: 0.01).")

  def check(self, rounds):
    require(self.variant in VARIANTS, 'variant', "'fedefc' or 'paper'", self.variant)
    require(self.mu >= 0, 'mu', 'a number >= 0', self.mu)
    require(self.alpha > 0, 'alpha', 'a number > 0 (the server divides by it)', self.alpha)
    super().check(rounds)


OFF_DEVICE = ('each client keeps a model-shaped state and sends it (or its change) '
              'beside the update (FedDyn)')
SPECS = {
    'feddyn': MethodSpec("FedDyn (baseline; FedEFC's code, or Acar et al. 2021): the "
                         "server's drift correction, or dynamic regularisation", FedDynParams,
                         'tff_noisy.methods.feddyn.algorithm:feddyn', off_device=OFF_DEVICE,
                         display='FedDyn'),
}
