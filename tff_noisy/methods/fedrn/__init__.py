"""FedRN (Kim et al., CIKM 2022): after warm-up, each client selects its clean examples by
a GMM ensemble over its own last local model and its k most reliable neighbours' (their
heads fine-tuned on its data), and trains the global model on them."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.fedrn import report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FedRNParams(Params):
  """FedRN's hyper-parameters (Kim et al. 2022, as its released code names them;
  FNBench's defaults)."""
  warmup_rounds: Optional[int] = described(None, 'T_w: rounds of plain FedAvg before the '
                                           'selection; null: ⌊0.25·fl.rounds⌋ (FNBench: 30 '
                                           'of its 120 rounds; the released code: 100 of '
                                           '500).')
  num_neighbors: int = described(1, 'k: reliable neighbours per client (FNBench: 1; the '
                                 'released code: 2); 0: its own GMM alone.')
  alpha: float = described(0.6, 'α in R_ij = α Ê_j + (1 − α) Ŝ_ij, expertise against '
                           'similarity (FNBench and the released scripts: 0.6).')
  threshold: float = described(0.5, 'τ: an example is clean when its (ensembled) clean '
                               'probability w > τ (both codes: p_threshold 0.5).')
  head_momentum: float = described(0.9, "μ of the SGD that fine-tunes a neighbour's head "
                                   '(the codes use their local momentum: FNBench 0.9, the '
                                   'release 0.5; its step size is fl.client_lr).')

  def warmup(self, rounds: int) -> int:
    """T_w: the configured one, else ⌊0.25·rounds⌋."""
    return int(0.25 * rounds) if self.warmup_rounds is None else int(self.warmup_rounds)

  def check(self, rounds):
    if self.warmup_rounds is not None:
      require(0 <= self.warmup_rounds < rounds, 'warmup_rounds',
              f'a number of rounds in [0, fl.rounds={rounds}) (or null)', self.warmup_rounds)
    require(self.num_neighbors >= 0, 'num_neighbors', 'an integer >= 0', self.num_neighbors)
    require(0 <= self.alpha <= 1, 'alpha', 'a number in [0, 1]', self.alpha)
    require(0 <= self.threshold < 1, 'threshold', 'a number in [0, 1)', self.threshold)
    require(0 <= self.head_momentum < 1, 'head_momentum', 'a number in [0, 1)',
            self.head_momentum)
    super().check(rounds)


SPECS = {
    'fedrn': MethodSpec(
        'FedRN (baseline; Kim et al. 2022): clean examples from a GMM ensemble over the '
        "client's last local model and its k reliable neighbours' models", FedRNParams,
        'tff_noisy.methods.fedrn.algorithm:fedrn',
        off_device="its clean set comes from its neighbours' models, which the server keeps "
        '(FedRN)', report_sections=report.SECTIONS, display='FedRN'),
}
