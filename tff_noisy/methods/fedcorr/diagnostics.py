"""FedCorr's relabelling record: each relabelled client's labels after the step against
the observed and the true labels. (Its detection flags are scored by MaskedOptim's
``NoisyClients``: flags against the clients whose labels are noisy.)"""

from typing import Dict

import numpy as np

from tff_noisy.methods.contract import Diagnostic
from tff_noisy.ops import knn


def relabelling_counts(observed, labels, true) -> dict:
  """How labels differ from the ``observed`` ones against the ``true`` ones: ``changed``,
  ``corrected`` (a wrong observed label made right), ``broken`` (a right one made wrong),
  and the wrong labels before and after."""
  observed, labels, true = map(np.asarray, (observed, labels, true))
  wrong = observed != true
  return {'changed': int(np.sum(labels != observed)),
          'corrected': int(np.sum(wrong & (labels == true))),
          'broken': int(np.sum(~wrong & (labels != true))),
          'wrong_before': int(wrong.sum()), 'wrong_after': int(np.sum(labels != true))}


class Relabelling(Diagnostic):
  """``{client id: labels [n]}`` after a relabelling step (``relabelling``): per client and
  over all of them, the counts of ``relabelling_counts`` and ``knn.correction_report``'s
  shares, against the observed labels the run started from."""

  def __init__(self, labels: Dict[str, np.ndarray], observed: Dict[str, np.ndarray]):
    self.labels = labels
    self.observed = observed

  def unscored(self):
    if not self.labels:
      return {}
    return {'relabelling': {'changed': {cid: int(np.sum(y != self.observed[cid]))
                                        for cid, y in self.labels.items()}}}

  def scored(self, truth):
    if not self.labels:
      return {}
    observed, true = truth.observed_labels, truth.true_labels

    def report(cids):
      arrays = [np.concatenate([source[c] for c in cids])
                for source in (observed, self.labels, true)]
      return {**relabelling_counts(*arrays), **knn.correction_report(*arrays)}

    return {'relabelling': {'overall': report(list(self.labels)),
                            'per_client': {cid: report([cid]) for cid in self.labels}}}
