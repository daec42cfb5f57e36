"""FedEFC's record: the clients' estimated transition matrices at the switch, against the
true ones (``transition_matrix_error``: L1 and cosine per estimator)."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import transition


class TransitionEstimates(diagnostics.Diagnostic):
  """``{estimator: {client id: Q}}``, Q[i, j] = p(noisy i | true j): the transpose of
  the truth's T, which is what they are compared with."""

  def __init__(self, estimates: Dict[str, Dict[str, np.ndarray]]):
    self.estimates = estimates

  def scored(self, truth):
    if not self.estimates:
      return {}
    true_matrices = {cid: m.T for cid, m in truth.transition_matrices.items()}
    return {'transition_matrix_error': {
        name: transition.matrix_error_report(estimates, true_matrices)
        for name, estimates in self.estimates.items()}}
