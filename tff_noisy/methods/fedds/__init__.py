"""FedDS (Dong et al. 2026): Dawid-Skene client reliabilities, fitted on the clients'
labels of an unlabelled public split, as aggregation weights (docs/papers/fedds.md)."""

import dataclasses

from tff_noisy.methods.common import MethodSpec, ProximalParams
from tff_noisy.methods.fedds import report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FedDSParams(Params):
  max_iter: int = described(500, 'Dawid-Skene EM iterations at most.')
  tol: float = described(1e-5, 'Stop when no posterior changes by more.')
  use_prior: bool = described(True, 'Class prior in the E-step (the paper); False: uniform '
                              '([code]).')
  smoothing: float = described(0.0, 'Laplace smoothing of the M-step counts.')
  weight_mode: str = described('reliability', "'reliability' (Eq. 8) or 'reliability_x_n'.")
  em: str = described('central', "'central': the server fits DS on the clients' public-set "
                      "labels; 'federated': clients label the public set and the server sees only "
                      'summed EM terms.')

  def check(self, rounds):
    require(self.max_iter >= 1, 'max_iter', 'an integer >= 1', self.max_iter)
    require(self.tol >= 0, 'tol', 'a number >= 0', self.tol)
    require(self.smoothing >= 0, 'smoothing', 'a number >= 0', self.smoothing)
    require(self.weight_mode in ('reliability', 'reliability_x_n'), 'weight_mode',
             "'reliability' or 'reliability_x_n'", self.weight_mode)
    require(self.em in ('central', 'federated'), 'em', "'central' or 'federated'", self.em)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class FedDSProxParams(FedDSParams, ProximalParams):
  """FedDS weighting over FedProx local training."""


_ALGORITHM = 'tff_noisy.methods.fedds.algorithm:'
SPECS = {
    'fedds': MethodSpec('FedDS: Dawid-Skene client reliabilities as weights', FedDSParams,
                        _ALGORITHM + 'fedds', needs_public_split=True,
                        report_sections=report.SECTIONS, display='FedDS'),
    'fedds_fedprox': MethodSpec('FedDS over FedProx local training', FedDSProxParams,
                                _ALGORITHM + 'fedds', needs_public_split=True,
                                report_sections=report.SECTIONS,
                                display='FedProx + FedDS'),
}
