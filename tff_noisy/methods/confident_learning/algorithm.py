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

from tff_noisy.methods.confident_learning.diagnostics import LabelIssues
from tff_noisy.methods.recipe import DataPlan, Recipe, ServerStep, stored_labels
from tff_noisy.ops import confident_learning as cl


class FindLabelIssues(ServerStep):
  """Each client's label issues, found on its own data before round 1."""

  def __init__(self, params, seed: int):
    self.params = params
    self.seed = seed

  def prepare(self, server) -> dict:
    data, store = server.data, server.store
    dropped = emptied = 0
    flags = {}
    for index, cid in enumerate(data.client_ids):
      issues = cl.client_label_issues(
          data.x[cid], stored_labels(cid, data, store), data.num_classes,
          folds=self.params.folds, seed=self.seed * 100003 + index)
      store.set_derived(cid, cl.LABEL_ISSUES, issues)
      flags[cid] = issues
      dropped += int(issues.sum())
      emptied += int(len(issues) > 0 and issues.all())
    return {'confident_learning': {'folds': self.params.folds, 'dropped_examples': dropped,
                                   'clients_left_empty': emptied},
            'label_issues': LabelIssues(flags)}


def kept_examples(client_id, store):
  """The client's examples without its label issues."""
  issues = store.get(client_id, cl.LABEL_ISSUES)
  return None if issues is None else np.flatnonzero(~issues)


def confident_learning(params, setup) -> Recipe:
  """FedAvg on each client's data without the label issues it finds before round 1."""
  return Recipe(data=DataPlan(kept=kept_examples),
                server=(FindLabelIssues(params, setup.seed),))
