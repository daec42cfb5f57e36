"""Confident Learning as a federated baseline (Northcutt et al. 2021; FedLN Table 1's
"CL"; FedEFC compares against it too).

Before round 1 every client runs Confident Learning on its own data alone
(``ops.confident_learning``: k-fold out-of-sample probabilities from a logistic
regression, then cleanlab's ``find_label_issues``) and from then on trains FedAvg's
cross-entropy without the examples it flagged. Nothing leaves the client but its model
updates; the flags are recomputed identically on resume. The run's ``extra`` says how
many examples were dropped and scores the flags against the truth (``LabelIssues``:
``extra.label_issues``, precision and recall).
"""

import numpy as np

from tff_noisy.methods import base
from tff_noisy.methods.confident_learning.diagnostics import LabelIssues
from tff_noisy.ops import confident_learning


class ConfidentLearning(base.Method):
  """FedAvg on each client's data without the label issues it finds before round 1."""

  def prepare(self, data, store) -> dict:
    dropped = emptied = 0
    flags = {}
    for index, cid in enumerate(data.client_ids):
      issues = confident_learning.client_label_issues(
          data.x[cid], self.labels(cid, data, store), data.num_classes,
          folds=self.params.folds, seed=self.setup.seed * 100003 + index)
      store.set_derived(cid, confident_learning.LABEL_ISSUES, issues)
      flags[cid] = issues
      dropped += int(issues.sum())
      emptied += int(len(issues) > 0 and issues.all())
    return {'confident_learning': {'folds': self.params.folds, 'dropped_examples': dropped,
                                   'clients_left_empty': emptied},
            'label_issues': LabelIssues(flags)}

  def kept_examples(self, client_id, store):
    issues = store.get(client_id, confident_learning.LABEL_ISSUES)
    return None if issues is None else np.flatnonzero(~issues)
