"""FedLN (Tsouvalas et al. 2023): NNC kNN label correction on a frozen encoder's
embeddings and NA-FedAvg's noise-aware weighting (docs/papers/fedln.md)."""

import dataclasses

from tff_noisy.embeddings.params import EncoderParams
from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.fedln import report
from tff_noisy.params import described, Params, is_number, require


@dataclasses.dataclass(frozen=True)
class NNCParams(EncoderParams):
  k: int = described(100, 'Neighbours in the vote, the sample itself included (clipped to the '
                     'client).')

  def check(self, rounds):
    require(self.k >= 1, 'k', 'an integer >= 1', self.k)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class NoiseAwareParams(Params):
  """NA-FedAvg's noise estimation (the paper's Eq. 2)."""
  activation_round: int = described(25, 'R_c: every client takes part and is scored.')
  nu: float = described(75.0, 'Percentile of the pooled global-model scores used as threshold.')
  temperature: float = described(1.0, 'Energy-score temperature T.')
  threshold: str = described('pooled', "'pooled': server sees scores; 'private': only histograms.")
  score_range: list = described((-50.0, 150.0), 'Private variant: histogram range of energy '
                                'scores.')
  score_bins: int = described(4000, 'Private variant: histogram bins (tau within one bin width).')

  def check(self, rounds):
    require(0 < self.nu < 100, 'nu', 'a percentile in (0, 100)', self.nu)
    require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    require(self.threshold in ('pooled', 'private'), 'threshold', "'pooled' or 'private'",
             self.threshold)
    low_high = self.score_range
    require(len(low_high) == 2 and all(is_number(v) for v in low_high)
             and low_high[0] < low_high[1], 'score_range', '[low, high] with low < high',
             low_high)
    require(self.score_bins >= 2, 'score_bins', 'an integer >= 2', self.score_bins)
    require(self.activation_round >= 1, 'activation_round', 'an integer >= 1',
             self.activation_round)
    require(self.activation_round <= rounds, 'activation_round',
             f'a round within fl.rounds={rounds}', self.activation_round)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class FedLNParams(NNCParams, NoiseAwareParams):
  """NNC and NA-FedAvg together."""


_ALGORITHM = 'tff_noisy.methods.fedln.algorithm:'
SPECS = {
    'fedln': MethodSpec('FedLN: NNC label correction + NA-FedAvg weighting', FedLNParams,
                        _ALGORITHM + 'fedln', report_sections=report.SECTIONS,
                        display='FedLN'),
    'fedln_nnc': MethodSpec('FedLN: NNC kNN label correction only', NNCParams,
                            _ALGORITHM + 'fedln_nnc', report_sections=report.SECTIONS,
                            display='FedLN (NNC)'),
    'fedln_nafedavg': MethodSpec('FedLN: NA-FedAvg noise-aware weighting only',
                                 NoiseAwareParams, _ALGORITHM + 'fedln_nafedavg',
                                 report_sections=report.SECTIONS,
                                 display='FedLN (NA-FedAvg)'),
}
