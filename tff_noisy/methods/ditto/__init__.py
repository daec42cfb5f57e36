"""Ditto (Li et al. 2021) as FedEFC's released code runs it (its Tables 2-3, "FedDitto"):
no personal model; each client trains the received model on cross-entropy plus
λ||θ - w^t||², FedAvg aggregates and the global model is scored."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require

# The personalised Ditto of the paper (a personal model per client, scored per client)
# needs what the client parts cannot do: train a second model kept between rounds, and
# per-client test examples to score it on.
PERSONAL_MISSING = ("'fedefc' (the paper's personalised Ditto, a personal model per "
                    'client scored on its own test examples, is not available)')


@dataclasses.dataclass(frozen=True)
class DittoParams(Params):
  """FedEFC's code's FedDitto: its λ (no 1/2: the gradient is 2λ(θ - w^t))."""
  variant: str = described('fedefc', "'fedefc': FedEFC's code's FedDitto (the only one).")
  lam: float = described(0.1, "λ of λ||θ - w^t||², every step (FedEFC's code: 0.1).")

  def check(self, rounds):
    require(self.variant == 'fedefc', 'variant', PERSONAL_MISSING, self.variant)
    require(self.lam > 0, 'lam', 'a number > 0', self.lam)
    super().check(rounds)


SPECS = {
    'ditto': MethodSpec("Ditto as FedEFC's code runs it (baseline; Li et al. 2021): "
                        'CE + λ||θ - w^t||², FedAvg', DittoParams,
                        'tff_noisy.methods.ditto.algorithm:ditto', display='FedDitto'),
}
