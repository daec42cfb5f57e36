"""Co-teaching (Han et al. 2018), uplifted to FL as MaskedOptim's Table 3 compares it:
every client trains two networks with small-loss cross-selection, both federated."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class CoTeachingParams(Params):
  """Co-teaching's forget-rate schedule R(T) (Han et al. 2018, Eq. 1 and §3)."""
  forget_rate: float = described(0.2, 'τ: the fraction of each batch left out (MaskedOptim: '
                                 '0.2).')
  gradual_rounds: int = described(10, 'T_k: rounds over which the forget rate rises from 0 '
                                  "to τ (the authors' default 10 epochs).")
  exponent: float = described(1.0, "c of the authors' code: the ramp ends at τ^c.")

  def check(self, rounds):
    require(0 <= self.forget_rate < 1, 'forget_rate', 'a number in [0, 1)', self.forget_rate)
    require(1 <= self.gradual_rounds <= rounds, 'gradual_rounds',
            f'a round within fl.rounds={rounds}', self.gradual_rounds)
    require(self.exponent > 0, 'exponent', 'a number > 0', self.exponent)
    super().check(rounds)


SPECS = {
    'coteaching': MethodSpec('Co-teaching (baseline; Han et al. 2018): two federated '
                             'networks with small-loss cross-selection',
                             CoTeachingParams,
                             'tff_noisy.methods.coteaching.algorithm:coteaching',
                             off_device='it trains two networks with a cross-selection '
                             'coupling the examples of a batch (Co-teaching)',
                             display='Co-teaching'),
}
