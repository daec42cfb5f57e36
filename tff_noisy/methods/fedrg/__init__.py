"""FedRG (Wen et al., CVPR 2026): federated SimCLR pre-training of the encoder (Stage I),
then per client a vMF mixture on the hypersphere of its features whose label-free
responsibilities, compared with the label-conditioned ones, split each batch into clean
and noisy examples (a GMM of 1 − P_clean); SCE on the batch plus, on the noisy examples,
the NLL through the client's own noise absorption matrix T (Stage II). From the released
code (github Tianjoker/FedRG); the paper's text was not available."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.fedrg import report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FedRGParams(Params):
  """FedRG's hyper-parameters (defaults: the released code's and its README's)."""
  warmup_rounds: Optional[int] = described(
      None, 'Stage I rounds (federated SimCLR); null: ⌊0.3·fl.rounds⌋ (the README: 150 of '
      '500 rounds).')
  clusters: Optional[int] = described(
      None, '|G|: vMF components of the geometry model; null: the number of classes (the '
      "code's trunc_L default; the README: 10 for CIFAR-10, 50 for CIFAR-100).")
  clean_weight: float = described(0.4, 'λ_c: weight of the SCE term over the batch (code '
                                  'loss_weight.clean_loss).')
  noise_weight: float = described(1.0, 'λ_n: weight of the NLL through T on the noisy '
                                  'examples (code loss_weight.noise_loss).')
  gmm_threshold: float = described(0.5, 'An example is clean when the GMM posterior of its '
                                   'lower-mean component is >= this (code gmm_thread).')
  dp_alpha: float = described(5.0, 'α of the mixture weights\' prior (code dp_alpha).')
  dirichlet_smooth: float = described(0.5, 'α_M: smoothing of the class-component map M '
                                      '(code dirichlet_smooth).')
  proto_momentum: float = described(0.1, 'η: momentum of the mixture\'s per-batch update '
                                    '(code proto_momentum).')
  temperature: float = described(0.07, 'τ of Stage I\'s InfoNCE (code info_nce_loss).')
  sce_alpha: float = described(0.1, 'α of SCE (CE weight; code SCELoss).')
  sce_beta: float = described(1.0, 'β of SCE (RCE weight; code SCELoss).')
  projector_hidden: int = described(4096, 'Hidden width of the SimCLR projector (code: '
                                    '4096).')
  projector_dim: int = described(2048, 'Output width of the SimCLR projector (code: 2048).')

  def warmup(self, rounds: int) -> int:
    """Stage I's rounds: the configured ones, else ⌊0.3·rounds⌋."""
    return int(0.3 * rounds) if self.warmup_rounds is None else int(self.warmup_rounds)

  def components(self, num_classes: int) -> int:
    return int(num_classes) if self.clusters is None else int(self.clusters)

  def check(self, rounds):
    if self.warmup_rounds is not None:
      require(0 <= self.warmup_rounds < rounds, 'warmup_rounds',
              f'a number of rounds in [0, fl.rounds={rounds}) (or null)', self.warmup_rounds)
    if self.clusters is not None:
      require(self.clusters >= 1, 'clusters', 'an integer >= 1 (or null)', self.clusters)
    require(self.clean_weight >= 0, 'clean_weight', 'a number >= 0', self.clean_weight)
    require(self.noise_weight >= 0, 'noise_weight', 'a number >= 0', self.noise_weight)
    require(0 < self.gmm_threshold < 1, 'gmm_threshold', 'a number in (0, 1)',
            self.gmm_threshold)
    require(self.dp_alpha > 0, 'dp_alpha', 'a number > 0', self.dp_alpha)
    require(self.dirichlet_smooth > 0, 'dirichlet_smooth', 'a number > 0',
            self.dirichlet_smooth)
    require(0 < self.proto_momentum <= 1, 'proto_momentum', 'a number in (0, 1]',
            self.proto_momentum)
    require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    require(self.sce_alpha >= 0, 'sce_alpha', 'a number >= 0', self.sce_alpha)
    require(self.sce_beta >= 0, 'sce_beta', 'a number >= 0', self.sce_beta)
    require(self.projector_hidden >= 1, 'projector_hidden', 'an integer >= 1',
            self.projector_hidden)
    require(self.projector_dim >= 1, 'projector_dim', 'an integer >= 1', self.projector_dim)
    super().check(rounds)


SPECS = {
    'fedrg': MethodSpec(
        'FedRG (Wen et al. 2026): federated SimCLR, then a per-client vMF geometry model '
        'splits clean/noisy examples; SCE plus the NLL through a personal noise absorption '
        'matrix', FedRGParams, 'tff_noisy.methods.fedrg.algorithm:fedrg',
        off_device='its batches hold a second, augmented view, a per-batch GMM splits them '
        'and each step updates its per-client geometry model (FedRG)',
        report_sections=report.SECTIONS, display='FedRG'),
}
