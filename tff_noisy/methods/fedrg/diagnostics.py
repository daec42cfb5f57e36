"""FedRG's record: each client's latest clean/noisy split against the true flips, and its
noise absorption matrix T against its true transition matrix."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import dividemix


class CleanSelection(diagnostics.Diagnostic):
  """``{client id: selection [n, 2]}`` (each example's latest clean flag and P_clean,
  rows of −1 for examples not yet split) and ``{client id: T̂ [C, C]}`` of the clients
  that have run Stage II. ``fedrg_selection`` holds, over their split examples, how many
  are flagged clean and that set's precision and recall for the clean labels (observed =
  true, ``ops.dividemix.selection_report``), the recall of the noisy flags for the wrong
  labels, the mean P_clean of clean and of wrong labels, and the mean absolute error of
  T̂ against each client's true T[i, j] = p(observed j | true i) beside that of the
  identity."""

  def __init__(self, selections: Dict[str, np.ndarray], transitions: Dict[str, np.ndarray]):
    self.selections = selections
    self.transitions = transitions

  def _split(self, ids):
    rows = np.concatenate([self.selections[c] for c in ids])
    return rows[:, 0] >= 0, rows

  def unscored(self):
    if not self.selections:
      return {}
    seen, rows = self._split(list(self.selections))
    return {'fedrg_selection': {'clients': len(self.selections), 'split': int(seen.sum()),
                                'selected': int((rows[seen, 0] > 0.5).sum())}}

  def scored(self, truth):
    if not self.selections:
      return {}
    ids = list(self.selections)
    seen, rows = self._split(ids)
    true = np.concatenate([truth.true_labels[c] for c in ids])[seen]
    observed = np.concatenate([truth.observed_labels[c] for c in ids])[seen]
    flagged, p_clean = rows[seen, 0] > 0.5, rows[seen, 1]
    clean = true == observed
    entry = {'clients': len(ids), 'split': int(seen.sum()),
             **dividemix.selection_report(flagged, true, observed),
             'noise_recall': (float((~flagged & ~clean).sum() / (~clean).sum())
                              if (~clean).any() else None),
             'p_clean_clean': float(p_clean[clean].mean()) if clean.any() else None,
             'p_clean_noisy': float(p_clean[~clean].mean()) if (~clean).any() else None}
    errors = [np.abs(t - truth.transition_matrices[c]).mean()
              for c, t in self.transitions.items()]
    identity = [np.abs(np.eye(len(t)) - truth.transition_matrices[c]).mean()
                for c, t in self.transitions.items()]
    entry['transition_error'] = float(np.mean(errors)) if errors else None
    entry['identity_error'] = float(np.mean(identity)) if identity else None
    return {'fedrg_selection': entry}
