"""Confident Learning's record: the label issues each client flagged, scored against the
simulation's true labels (precision: flagged labels that are wrong; recall: wrong labels
flagged)."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics

LABEL_ISSUES = 'label_issues'  # results.json ``extra`` field.


class LabelIssues(diagnostics.Diagnostic):
  """``{client id: bool [n]}``: the examples each client flagged and dropped."""

  def __init__(self, flags: Dict[str, np.ndarray]):
    self.flags = flags

  def unscored(self):
    if not self.flags:
      return {}
    return {LABEL_ISSUES: {'flagged': {cid: int(f.sum()) for cid, f in self.flags.items()}}}

  def scored(self, truth):
    if not self.flags:
      return {}

    def scores(cids):
      issues = np.concatenate([self.flags[c] for c in cids])
      wrong = np.concatenate([truth.observed_labels[c] != truth.true_labels[c] for c in cids])
      hits = int(np.sum(issues & wrong))
      return {'flagged': int(issues.sum()), 'wrong_labels': int(wrong.sum()),
              'examples': len(wrong),
              'precision': hits / int(issues.sum()) if issues.any() else None,
              'recall': hits / int(wrong.sum()) if wrong.any() else None}

    return {LABEL_ISSUES: {'overall': scores(list(self.flags)),
                           'per_client': {cid: scores([cid]) for cid in self.flags}}}
