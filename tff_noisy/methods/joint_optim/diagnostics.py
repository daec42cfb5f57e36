"""Joint Optimization's record: its clients' current labels, against the true labels."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import joint_optim


class SoftLabels(diagnostics.Diagnostic):
  """``{client id: labels [n, C]}`` of the clients that have trained: ``corrected_labels``
  (``ops.joint_optim.label_report`` of their argmax over all their examples: the share
  right, the share of flipped labels corrected, the share of the others still right)."""

  def __init__(self, labels: Dict[str, np.ndarray]):
    self.labels = labels

  def unscored(self):
    if not self.labels:
      return {}
    return {'corrected_labels': {'clients': len(self.labels)}}

  def scored(self, truth):
    if not self.labels:
      return {}
    ids = list(self.labels)
    report = joint_optim.label_report(
        np.concatenate([self.labels[c] for c in ids]),
        np.concatenate([truth.true_labels[c] for c in ids]),
        np.concatenate([truth.observed_labels[c] for c in ids]))
    return {'corrected_labels': {'clients': len(ids), **report}}
