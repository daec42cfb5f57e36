"""FedExP (Jhunjhunwala et al. 2023): FedAvg clients, the server's step extrapolated by an
adaptive η_g from the clients' updates (MaskedOptim's Table 3 runs it through FNBench's
code)."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require

ANCHORS = ('initial', 'previous')


@dataclasses.dataclass(frozen=True)
class FedExPParams(Params):
  """Where the updates are measured from, and the denominator's ε."""
  anchor: str = described('initial', "'initial': updates and step from the initial model θ^0 "
                          "(FNBench's code, MaskedOptim's Table 3); 'previous': from θ^{t-1} "
                          '(the paper, Eqs. 8-10).')
  epsilon: float = described(1e-3, 'ε of η_g = max(1, Σ p_i||Δ_i||² / (2(||Δ̄||² + ε))) '
                             '(FNBench: 1e-3).')

  def check(self, rounds):
    require(self.anchor in ANCHORS, 'anchor', "'initial' or 'previous'", self.anchor)
    require(self.epsilon >= 0, 'epsilon', 'a number >= 0', self.epsilon)
    super().check(rounds)


SPECS = {
    'fedexp': MethodSpec('FedExP (baseline; Jhunjhunwala et al. 2023): extrapolated server '
                         'step', FedExPParams, 'tff_noisy.methods.fedexp.algorithm:fedexp',
                         display='FedExP'),
}
