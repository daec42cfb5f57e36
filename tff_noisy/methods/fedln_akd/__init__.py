"""FedLN-AKD (Tsouvalas et al. 2023): adaptive knowledge distillation from a frozen
encoder's embeddings on the clients whose k-NN noise estimate is above a threshold
(docs/methods.md; the released code FederatedML/FedLN at 1ff2ff7)."""

import dataclasses

from tff_noisy.embeddings.params import EncoderParams
from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.fedln_akd import report
from tff_noisy.params import described, require


@dataclasses.dataclass(frozen=True)
class FedLNAKDParams(EncoderParams):
  """AKD (the code's ``fedln__akd.py`` and ``utils/distiller.py``): the noise estimate's
  k-NN and threshold, the distillation weight alpha; the defaults are ``ops.akd``'s
  constants, written out: importing ``ops.akd`` imports TensorFlow, and this module must not."""
  alpha: float = described(10.0, "alpha, the weight of the L1 (mean absolute error) "
                           "distillation term next to cross-entropy (the code's 10).")
  neighbors: int = described(10, 'k of the k-NN noise estimate, the example '
                             "itself included (clipped to the client; the code's 10).")
  noise_threshold: float = described(
      0.15, 'Noise estimates below it are 0; a client distils when its '
      "estimate is > 0 (the code's 0.15).")

  def check(self, rounds):
    require(self.alpha >= 0, 'alpha', 'a number >= 0', self.alpha)
    require(self.neighbors >= 1, 'neighbors', 'an integer >= 1', self.neighbors)
    require(0 <= self.noise_threshold <= 1, 'noise_threshold', 'a number in [0, 1]',
            self.noise_threshold)
    super().check(rounds)


SPECS = {
    'fedln_akd': MethodSpec(
        'FedLN-AKD: L1 distillation of frozen-encoder embeddings on clients estimated noisy',
        FedLNAKDParams, 'tff_noisy.methods.fedln_akd.algorithm:fedln_akd',
        off_device="its loss reads the model's penultimate features and per-example "
        'encoder embeddings (the representation head)', display='FedLN-AKD',
        report_sections=report.SECTIONS),
}
