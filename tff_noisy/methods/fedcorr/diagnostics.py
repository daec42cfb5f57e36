"""FedCorr's relabelling record: each relabelled client's labels after the step against
the observed and the true labels. (Its detection flags are scored by MaskedOptim's
``NoisyClients``: flags against the clients whose labels are noisy.)"""

from typing import Dict

import numpy as np

from tff_noisy.methods.contract import Diagnostic
from tff_noisy.ops import knn


class Relabelling(Diagnostic):
  """``{client id: labels [n]}`` after a relabelling step (``relabelling``): per client and
  over all of them, the counts of ``knn.relabelling_counts`` and ``knn.correction_report``'s
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
      return {**knn.relabelling_counts(*arrays), **knn.correction_report(*arrays)}

    return {'relabelling': {'overall': report(list(self.labels)),
                            'per_client': {cid: report([cid]) for cid in self.labels}}}
