"""FedCorr (Xu et al., CVPR 2022): pre-processing with LID-based noisy-client detection,
noise-level estimation, relabelling and an adaptive proximal term; fine-tuning on the
relatively clean clients; usual training on every client with the corrected labels."""

import dataclasses
from typing import Optional

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods import noisy_clients
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class FedCorrParams(Params):
  """FedCorr (Xu et al. 2022; defaults: the paper's and its released code's). Rounds
  1..t1 are pre-processing iterations (every client trains once in each, in groups of a
  frac1 share of the clients aggregated one after the other), the next t2 rounds
  fine-tune on the relatively clean clients, the last t3 rounds train on every client:
  t1 + t2 + t3 = fl.rounds."""
  t1: int = described(5, 'T_1: pre-processing iterations, one round each (code iteration1 5).')
  t2: Optional[int] = described(None, 'T_2: fine-tuning rounds; null: half of fl.rounds - t1 '
                                '(or the rest beside t3); code rounds1 200.')
  t3: Optional[int] = described(None, 'T_3: usual-training rounds; null: fl.rounds - t1 - t2; '
                                'code rounds2 200.')
  frac1: float = described(0.01, "Share of the clients in each pre-processing group (code "
                           'frac1 0.01: one client at a time among 100).')
  beta: float = described(5.0, 'β: weight of the adaptive proximal term β μ̂_k ‖w − w_g‖ in '
                          'pre-processing (code README 5).')
  relabel_ratio: float = described(0.5, "r: share of a noisy client's ⌊n μ̂⌋ largest-loss "
                                   'samples it may relabel in pre-processing.')
  confidence: float = described(0.5, "Relabel where the global model's largest probability "
                                'exceeds it (code confidence_thres).')
  clean_threshold: float = described(0.1, 'Fine-tuning trains on clients with μ̂ <= it (code '
                                     'clean_set_thres).')
  lid_k: int = described(20, 'k: neighbours in the LID estimate (code LID_k).')
  mixup: bool = described(True, 'Train every local step on mixup batches (the code\'s '
                          '--mixup, on in all its command lines).')
  mixup_alpha: float = described(1.0, 'α of mixup\'s λ ~ Beta(α, α) (code alpha 1).')

  def stage_lengths(self, rounds: int) -> tuple:
    """(T_1, T_2, T_3) on ``rounds`` (fl.rounds), the nulls resolved."""
    rest = rounds - self.t1
    if self.t2 is None and self.t3 is None:
      return self.t1, rest // 2, rest - rest // 2
    if self.t2 is None:
      return self.t1, rest - self.t3, self.t3
    return self.t1, self.t2, rest - self.t2 if self.t3 is None else self.t3

  def check(self, rounds):
    require(self.t1 >= 1, 't1', 'an integer >= 1', self.t1)
    require(self.t1 < rounds, 't1', f'fewer rounds than fl.rounds={rounds}', self.t1)
    for name in ('t2', 't3'):
      value = getattr(self, name)
      require(value is None or value >= 0, name, 'an integer >= 0 (or null)', value)
    rest = rounds - self.t1
    if self.t2 is not None:
      require(self.t2 <= rest, 't2', f'at most fl.rounds - t1 = {rest} rounds', self.t2)
    if self.t3 is not None and self.t2 is not None:
      require(self.t3 == rest - self.t2, 't3', f'fl.rounds - t1 - t2 = {rest - self.t2} '
              'rounds (t1 + t2 + t3 = fl.rounds)', self.t3)
    elif self.t3 is not None:
      require(self.t3 <= rest, 't3', f'at most fl.rounds - t1 = {rest} rounds', self.t3)
    require(0 < self.frac1 <= 1, 'frac1', 'a share in (0, 1]', self.frac1)
    require(self.beta >= 0, 'beta', 'a number >= 0', self.beta)
    require(0 <= self.relabel_ratio <= 1, 'relabel_ratio', 'a share in [0, 1]',
            self.relabel_ratio)
    require(0 <= self.confidence < 1, 'confidence', 'a probability in [0, 1)',
            self.confidence)
    require(0 <= self.clean_threshold <= 1, 'clean_threshold', 'a share in [0, 1]',
            self.clean_threshold)
    require(self.lid_k >= 1, 'lid_k', 'an integer >= 1', self.lid_k)
    require(self.mixup_alpha > 0, 'mixup_alpha', 'a number > 0', self.mixup_alpha)
    super().check(rounds)


SPECS = {
    'fedcorr': MethodSpec(
        'FedCorr: LID-based noisy-client detection, noise-level estimation and relabelling '
        'with an adaptive proximal term, fine-tuning on clean clients, usual training',
        FedCorrParams, 'tff_noisy.methods.fedcorr.algorithm:fedcorr',
        off_device="its clients return their local model's outputs and train an adaptive "
        'proximal term the server sets per client',
        report_sections=noisy_clients.SECTIONS, display='FedCorr'),
}
