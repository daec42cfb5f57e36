"""DivideMix's record: each network's labelled set (w > τ) against the clean labels."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import dividemix


class CleanSelection(diagnostics.Diagnostic):
  """``{client id: w [n, 2]}`` (columns: network f's GMM, network g's) of every client
  divided so far (its latest division, from the start of its last round), and τ: ``dividemix_selection`` holds, for each network's division
  over all their examples (``ops.dividemix.selection_report``), how many are labelled
  and the precision and recall of that labelled set for the clean labels (observed =
  true). f's division trains g and g's trains f."""

  def __init__(self, probabilities: Dict[str, np.ndarray], threshold: float):
    self.probabilities = probabilities
    self.threshold = float(threshold)

  def _selected(self, ids, column):
    return np.concatenate([self.probabilities[c][:, column] > self.threshold for c in ids])

  def unscored(self):
    if not self.probabilities:
      return {}
    ids = list(self.probabilities)
    return {'dividemix_selection': {'clients': len(ids), **{
        f'selected_{name}': int(self._selected(ids, column).sum())
        for column, name in enumerate('fg')}}}

  def scored(self, truth):
    if not self.probabilities:
      return {}
    ids = list(self.probabilities)
    true = np.concatenate([truth.true_labels[c] for c in ids])
    observed = np.concatenate([truth.observed_labels[c] for c in ids])
    entry = {'clients': len(ids)}
    for column, name in enumerate('fg'):
      report = dividemix.selection_report(self._selected(ids, column), true, observed)
      entry.update({f'{key}_{name}': value for key, value in report.items()})
    return {'dividemix_selection': entry}
