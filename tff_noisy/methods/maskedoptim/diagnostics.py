"""MaskedOptim's records: which clients its detection flagged, against the truly noisy
ones, and the labels it estimates on them, against the true labels."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import detection
from tff_noisy.ops import label_distribution


class NoisyClients(diagnostics.Diagnostic):
  """``{client id: flagged}``: ``noisy_clients`` (the flagged ids) and their precision
  and recall against the clients whose labels are noisy (``detection_truth``)."""

  def __init__(self, flags: Dict[str, bool]):
    self.flags = flags

  def unscored(self):
    if not self.flags:
      return {}
    return {'noisy_clients': [cid for cid, flagged in self.flags.items() if flagged]}

  def scored(self, truth):
    if not self.flags:
      return {}
    return {**self.unscored(),
            'detection_truth': detection.detection_report(
                list(self.flags.values()), [truth.noise_rates[cid] for cid in self.flags])}


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
