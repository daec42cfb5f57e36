"""FedEFC (docs/papers/fedefc.md): prestopping on the clients' accuracy on their own labels,
then forward correction with each client's own transition matrix; plain forward
correction (Patrini et al. 2017) after the same switch as its baseline."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.fedefc import report
from tff_noisy.ops import prestop
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class PrestopParams(Params):
  """FedEFC's prestopping monitor (the paper's §3.1): when training switches phase."""
  t_mon: int = described(10, 'Rounds after t_mon + 1 (monitor_from code) or after t_mon '
                         '(paper) are monitored.')
  gamma: int = described(3, 'gamma_thr: non-improving monitored rounds that fire the switch.')
  signal: str = described('global', "'global': received model's accuracy on own labels (Eq. 2); "
                          "'training': running training accuracy ([code]).")
  rule: str = described('best', "'best': beat the best so far ([code]); 'previous': the last "
                        'round.')
  monitor_from: str = described('code', "'code': monitor rounds t > t_mon + 1 ([code]'s "
                                "rnd > start_monitor, rounds from 0); 'paper': t > t_mon.")

  def check(self, rounds):
    require(self.monitor_from in prestop.MONITOR_FROM, 'monitor_from', "'code' or 'paper'",
            self.monitor_from)
    require(self.t_mon >= 0, 't_mon', 'an integer >= 0', self.t_mon)
    require(prestop.first_monitored_round(self.t_mon, self.monitor_from) <= rounds, 't_mon',
            f'a first monitored round (t_mon + {2 if self.monitor_from == "code" else 1} '
            f'with monitor_from {self.monitor_from}) within fl.rounds={rounds}', self.t_mon)
    require(self.gamma >= 1, 'gamma', 'an integer >= 1', self.gamma)
    require(self.signal in ('global', 'training'), 'signal', "'global' or 'training'",
             self.signal)
    require(self.rule in ('best', 'previous'), 'rule', "'best' or 'previous'", self.rule)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class CorrectionParams(PrestopParams):
  """Forward correction after the switch, with each client's own transition matrix."""
  prior_comp: bool = described(False, "[code]'s class-prior compensation of the matrix.")
  report_matrix_error: bool = described(True, "Simulation: the matrices' errors at the switch.")


@dataclasses.dataclass(frozen=True)
class FedEFCParams(CorrectionParams):
  normalise: str = described('column', "Eq. 9: 'column' (p(noisy | true)) or 'row' (ablation).")
  guess: str = described('passing', "True-class guess with 2+ classes over their thresholds: "
                         "'passing': the likeliest of them; 'cleanlab': the global argmax "
                         '([code]).')

  def check(self, rounds):
    require(self.guess in ('passing', 'cleanlab'), 'guess', "'passing' or 'cleanlab'",
            self.guess)
    require(self.normalise in ('column', 'row'), 'normalise', "'column' or 'row'",
             self.normalise)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class ForwardCorrectionParams(CorrectionParams):
  anchor_percentile: float = described(97.0, "Patrini's anchors: samples at or above it, per "
                                       'class.')

  def check(self, rounds):
    require(0 < self.anchor_percentile <= 100, 'anchor_percentile',
             'a percentile in (0, 100]', self.anchor_percentile)
    super().check(rounds)


_ALGORITHM = 'tff_noisy.methods.fedefc.algorithm:'
SPECS = {
    'fedefc': MethodSpec('FedEFC: prestopping, then confident-joint forward correction',
                         FedEFCParams, _ALGORITHM + 'fedefc',
                         report_sections=report.SECTIONS, display='FedEFC'),
    'forward_correction': MethodSpec(
        'Forward correction (Patrini anchors) after the FedEFC prestopping switch',
        ForwardCorrectionParams, _ALGORITHM + 'forward_correction',
        report_sections=report.SECTIONS, display='Forward correction'),
}
