"""LSC: a local K-similarity contrastive regulariser on a frozen encoder's in-batch
neighbours (docs/papers/lsc.md)."""

import dataclasses

from tff_noisy.embeddings.params import EncoderParams
from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.lsc import report
from tff_noisy.params import described, require


@dataclasses.dataclass(frozen=True)
class LSCParams(EncoderParams):
  """LSC (§3.2 and §4.1 of the paper); ``encoder: random`` is a frozen, randomly initialised
  copy of the ``embed pretrain`` backbone: the paper's Table 4 control."""
  k: int = described(4, 'In-batch neighbours K from the encoder (clipped to batch size - 1).')
  temperature: float = described(0.3, 'T of the cosine similarities.')
  lam: float = described(3.0, 'lambda, the weight of the contrastive term next to cross-entropy.')
  exclude_self: bool = described(True, 'False: the denominator keeps l = j (Eq. 2 as written).')

  def check(self, rounds):
    require(self.k >= 1, 'k', 'an integer >= 1', self.k)
    require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    require(self.lam >= 0, 'lam', 'a number >= 0', self.lam)
    super().check(rounds)


SPECS = {
    'lsc': MethodSpec('LSC: local K-similarity contrastive term on a frozen encoder',
                      LSCParams, 'tff_noisy.methods.lsc.algorithm:lsc',
                      off_device="its loss reads the model's penultimate features and "
                      "per-example encoder embeddings (LSC's K-similarity objective)",
                      report_sections=report.SECTIONS, display='LSC'),
}
