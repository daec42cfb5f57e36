"""Ditto (Li, Hu, Beirami & Smith, ICML 2021), two readings.

'fedefc' (the default) as FedEFC's released code runs it (its Tables 2-3, "FedDitto"): no
personal model; each client trains the received model on cross-entropy plus
λ||θ - w^t||², FedAvg aggregates and the global model is scored.

'paper' (Algorithm 1): the global model w is FedAvg's; besides it each client k keeps a
personal model v_k, trained at every local step on F_k(v) + (λ/2)||v - w^t||² and never
sent; each client's personal model is scored on its own held-out examples.
"""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.ditto import report
from tff_noisy.params import described, Params, require

VARIANTS = ('fedefc', 'paper')


@dataclasses.dataclass(frozen=True)
class DittoParams(Params):
  """Which Ditto, its λ and (the paper's) share of each client's examples held out."""
  # Added with the paper's reading: FedDitto's runs recorded before it are the same runs.
  added_fields = {'test_fraction': 1 / 7}
  variant: str = described('fedefc', "'fedefc': FedEFC's code's FedDitto (CE + λ||θ - w^t||², "
                           "the global model scored); 'paper': Li et al. 2021, Algorithm 1 "
                           '(FedAvg plus a personal model per client, scored on its own '
                           'held-out examples).')
  lam: float = described(0.1, "'fedefc': λ of λ||θ - w^t||², every step (FedEFC's code: "
                         "0.1); 'paper': λ of (λ/2)||v_k - w^t||² (Ditto's scripts: 1).")
  test_fraction: float = described(1 / 7, "'paper': share of each client's examples held "
                                   'out as its local test set, never trained on (Ditto\'s '
                                   'Fashion-MNIST split: one test example per six '
                                   'training ones).')

  def check(self, rounds):
    require(self.variant in VARIANTS, 'variant', "'fedefc' or 'paper'", self.variant)
    require(self.lam > 0, 'lam', 'a number > 0', self.lam)
    require(0 < self.test_fraction < 1, 'test_fraction', 'a number in (0, 1)',
            self.test_fraction)
    super().check(rounds)


SPECS = {
    'ditto': MethodSpec("Ditto as FedEFC's code runs it (baseline; Li et al. 2021): "
                        "CE + λ||θ - w^t||², FedAvg; variant 'paper': personal models",
                        DittoParams, 'tff_noisy.methods.ditto.algorithm:ditto',
                        report_sections=report.SECTIONS, display='FedDitto'),
}
