"""MaskedOptim's records: the labels it estimates on the clients it flagged, against the
true labels (the flags: ``methods.noisy_clients``)."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import label_distribution


class LabelEstimates(diagnostics.Diagnostic):
  """``{client id: estimated labels [n]}`` of the flagged clients, against the observed
  and the true labels (``label_estimate_accuracy``)."""

  def __init__(self, estimates: Dict[str, np.ndarray]):
    self.estimates = estimates

  def scored(self, truth):
    if not self.estimates:
      return {}
    return {'label_estimate_accuracy': label_distribution.estimate_accuracy_report(
        self.estimates, truth.observed_labels, truth.true_labels)}
