"""FedLN's records: NNC's corrected labels against the true labels, and NA-FedAvg's
per-client noise estimates against the true noise rates."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import knn


class LabelCorrection(diagnostics.Diagnostic):
  """``{client id: corrected labels [n]}``, scored by ``knn.correction_report`` per
  client and over all of them (``extra.label_correction``)."""

  def __init__(self, corrected: Dict[str, np.ndarray]):
    self.corrected = corrected

  def scored(self, truth):
    if not self.corrected:
      return {}
    observed, true = truth.observed_labels, truth.true_labels
    per_client = {cid: knn.correction_report(observed[cid], labels, true[cid])
                  for cid, labels in self.corrected.items()}
    overall = knn.correction_report(
        np.concatenate([observed[c] for c in self.corrected]),
        np.concatenate(list(self.corrected.values())),
        np.concatenate([true[c] for c in self.corrected]))
    return {'label_correction': {'overall': overall, 'per_client': per_client}}


class NoiseEstimates(diagnostics.Diagnostic):
  """NA-FedAvg's ``{client id: n_hat}`` and their Pearson r with the true noise rates
  (``noise_estimate_correlation``, absent for fewer than two clients)."""

  def __init__(self, estimates: Dict[str, float]):
    self.estimates = estimates

  def unscored(self):
    return {'noise_estimates': self.estimates}

  def scored(self, truth):
    entries = self.unscored()
    r = diagnostics.correlation(self.estimates, truth.noise_rates)
    if r is not None:
      entries['noise_estimate_correlation'] = r
    return entries
