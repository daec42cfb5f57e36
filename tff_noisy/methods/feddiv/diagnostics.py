"""FedDiv's records, scored against the simulation's truth: the global filter's clean split
and the round's training sets (``Selection``), and the labels its relabelling left
(``Relabelling``)."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import dividemix
from tff_noisy.ops import knn


class Selection(diagnostics.Diagnostic):
  """The round's clients: ``clean`` {id: bool [n]} the global filter's split of their
  examples under their ``labels`` {id: [n]} at the split, ``trained`` {id: positions} the
  examples each trained on with ``training_labels`` {id: [n]} (none for an idle client).
  ``feddiv_selection``: the split's ``selected``, ``precision`` and ``recall`` for the
  examples whose label at the split is right (``ops.dividemix.selection_report``), and
  the training set's size (``trained``) and its share of right labels
  (``trained_precision``) beside that share over all the clients' examples
  (``label_accuracy``)."""

  def __init__(self, clean: Dict[str, np.ndarray], labels: Dict[str, np.ndarray],
               trained: Dict[str, np.ndarray], training_labels: Dict[str, np.ndarray]):
    self.clean, self.labels = clean, labels
    self.trained, self.training_labels = trained, training_labels

  def unscored(self):
    if not self.clean:
      return {}
    return {'feddiv_selection': {
        'clients': len(self.clean),
        'selected': int(sum(int(c.sum()) for c in self.clean.values())),
        'trained': int(sum(len(t) for t in self.trained.values()))}}

  def scored(self, truth):
    if not self.clean:
      return {}
    ids = list(self.clean)
    true = np.concatenate([truth.true_labels[c] for c in ids])
    report = dividemix.selection_report(  # "observed": the labels the filter split on.
        np.concatenate([self.clean[c] for c in ids]), true,
        np.concatenate([self.labels[c] for c in ids]))
    right = [np.asarray(self.training_labels[c])[self.trained[c]] == truth.true_labels[c][
        self.trained[c]] for c in ids]
    right = np.concatenate(right) if right else np.zeros(0, bool)
    return {'feddiv_selection': {
        'clients': len(ids), **report, 'trained': int(len(right)),
        'trained_precision': float(right.mean()) if len(right) else None,
        'label_accuracy': float(np.mean(np.concatenate([self.labels[c] for c in ids]) == true))}}


class Relabelling(diagnostics.Diagnostic):
  """``{client id: labels [n]}`` of every client visited so far: ``feddiv_relabelling``
  over all of them, the counts of ``knn.relabelling_counts`` and ``knn.correction_report``'s
  shares (``fixed``: flips corrected, ``corrupted``: clean labels broken), against the
  observed labels the run started from."""

  def __init__(self, labels: Dict[str, np.ndarray]):
    self.labels = labels

  def scored(self, truth):
    if not self.labels:
      return {}
    ids = list(self.labels)
    arrays = [np.concatenate([source[c] for c in ids])
              for source in (truth.observed_labels, self.labels, truth.true_labels)]
    return {'feddiv_relabelling': {'clients': len(ids), **knn.relabelling_counts(*arrays),
                                   **knn.correction_report(*arrays)}}
