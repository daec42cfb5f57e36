"""Confident Learning as a federated baseline (Northcutt et al. 2021; FedLN Table 1's
"CL", FedEFC's baseline): each client drops the label issues it finds on its own data."""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.confident_learning import report
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class ConfidentLearningParams(Params):
  """Confident Learning (Northcutt et al. 2021; FedLN Table 1's CL, FedEFC's baseline)."""
  folds: int = described(5, 'k of the k-fold cross-validation giving out-of-sample probabilities.')

  def check(self, rounds):
    require(self.folds >= 2, 'folds', 'an integer >= 2', self.folds)
    super().check(rounds)


SPECS = {
    'confident_learning': MethodSpec(
        "Confident Learning (baseline; Northcutt et al. 2021): each client drops the label "
        'issues cleanlab finds with k-fold probabilities of its own data',
        ConfidentLearningParams,
        'tff_noisy.methods.confident_learning.algorithm:confident_learning',
        report_sections=report.SECTIONS, display='Confident learning'),
}
