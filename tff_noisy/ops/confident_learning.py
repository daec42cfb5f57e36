"""Confident Learning on one client's own data (Northcutt et al. 2021; FedLN Table 1's
"CL", FedEFC's confident-learning baseline): flag the label issues, train without them.

1. Out-of-sample probabilities of the client's own labels by ``folds``-fold
   cross-validation (stratified where every class has enough examples, else plain
   shuffled folds) of a multinomial logistic regression on the flattened inputs
   (scikit-learn, L2 C = 1, lbfgs): the small model, cheap enough to fit five times per
   client, that the client can train on its own data before federated training starts.
   A class absent from a fold's training part gets probability 0 there.
2. cleanlab's ``find_label_issues`` (its default, ``prune_by_noise_rate``) on those
   probabilities.

A client with fewer than 2 classes or fewer examples than ``folds`` flags nothing.
NumPy and scikit-learn only; deterministic for a given ``seed``.
"""

import warnings

import numpy as np
from sklearn import exceptions as sk_exceptions
from sklearn import linear_model
from sklearn import model_selection

DEFAULT_FOLDS = 5
# Where a method keeps each client's flags (bool [n]) in the client state store; the
# driver scores them against the simulation truth.
LABEL_ISSUES = 'label_issues'


def out_of_sample_probabilities(x: np.ndarray, labels: np.ndarray, num_classes: int,
                                folds: int = DEFAULT_FOLDS, seed: int = 0) -> np.ndarray:
  """[n, num_classes] probabilities of each example from a model that did not see it."""
  labels = np.asarray(labels, np.int64)
  features = np.asarray(x, np.float64).reshape(len(labels), -1)
  probs = np.zeros((len(labels), num_classes))
  counts = np.bincount(labels, minlength=num_classes)
  splitter = (model_selection.StratifiedKFold if counts[counts > 0].min() >= folds
              else model_selection.KFold)(n_splits=folds, shuffle=True, random_state=seed)
  for train, held_out in splitter.split(features, labels):
    seen = np.unique(labels[train])
    if len(seen) == 1:  # Nothing to discriminate: all mass on the one class seen.
      probs[np.ix_(held_out, seen)] = 1.0
      continue
    model = linear_model.LogisticRegression(max_iter=500)
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', sk_exceptions.ConvergenceWarning)
      model.fit(features[train], labels[train])
    probs[np.ix_(held_out, model.classes_)] = model.predict_proba(features[held_out])
  return probs


def find_label_issues(labels: np.ndarray, pred_probs: np.ndarray) -> np.ndarray:
  """bool [n]: cleanlab's label issues (``prune_by_noise_rate``) of ``labels``."""
  from cleanlab import filter as cleanlab_filter  # pylint: disable=g-import-not-at-top
  labels = np.asarray(labels, np.int64)
  if len(np.unique(labels)) < 2:
    return np.zeros(len(labels), bool)
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')  # Classes a client lacks: cleanlab warns, then copes.
    # n_jobs=1: no process pool. Forking a process whose TensorFlow and gRPC threads
    # hold locks can leave the pool's workers hung (seen here); cleanlab's results do not
    # depend on n_jobs.
    return np.asarray(cleanlab_filter.find_label_issues(labels, pred_probs, n_jobs=1), bool)


def client_label_issues(x: np.ndarray, labels: np.ndarray, num_classes: int,
                        folds: int = DEFAULT_FOLDS, seed: int = 0) -> np.ndarray:
  """bool [n]: the label issues Confident Learning finds on one client's data."""
  labels = np.asarray(labels, np.int64)
  if len(labels) < folds or len(np.unique(labels)) < 2:
    return np.zeros(len(labels), bool)
  return find_label_issues(labels, out_of_sample_probabilities(x, labels, num_classes,
                                                               folds, seed))
