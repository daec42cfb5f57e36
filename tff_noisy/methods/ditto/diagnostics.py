"""Ditto's record: each client's personal model on its own held-out examples (Li et al.
2021, the personalised test accuracy), against their true labels."""

from typing import Dict

import numpy as np

from tff_noisy.methods import contract
from tff_noisy.ops import ditto

PERSONALIZED_ACCURACY = 'personalized_accuracy'
CLIENT_MEAN = 'personalized_client_mean_accuracy'
RECORD = 'ditto_personal'


def accuracy_entries(predicted: Dict[str, np.ndarray], labels: Dict[str, np.ndarray]) -> dict:
  """``{personalized_accuracy, personalized_client_mean_accuracy, ditto_personal}`` of the
  clients' predictions against ``labels``: Σ_k correct_k / Σ_k tested_k, the mean over the
  clients of correct_k / tested_k, and (``ditto_personal``) both with the clients, their
  test examples and the variance of their accuracies (``ops.ditto``)."""
  ids = [cid for cid in predicted if len(predicted[cid])]
  if not ids:
    return {}
  correct = [int(np.sum(predicted[c] == labels[c])) for c in ids]
  tested = [len(predicted[c]) for c in ids]
  pooled = ditto.personalized_accuracy(correct, tested)
  mean = ditto.client_mean_accuracy(correct, tested)
  return {PERSONALIZED_ACCURACY: pooled, CLIENT_MEAN: mean,
          RECORD: {'clients': len(ids), 'test_examples': int(sum(tested)), 'accuracy': pooled,
                   'client_mean_accuracy': mean,
                   'accuracy_variance': ditto.accuracy_variance(correct, tested)}}


class PersonalAccuracy(contract.Diagnostic):
  """``{client id: predicted classes}`` of every client's personal model on its held-out
  examples (``positions``: their places in the client's data; ``observed``: their labels
  as the client holds them). Scored against the true labels, as the global model's test
  accuracy is; ``ditto_personal.accuracy_observed_labels`` is the pooled accuracy on the
  observed (possibly noisy) labels, what a device could measure itself."""

  def __init__(self, predicted: Dict[str, np.ndarray], positions: Dict[str, np.ndarray],
               observed: Dict[str, np.ndarray]):
    self.predicted = predicted
    self.positions = positions
    self.observed = observed

  def unscored(self):
    return accuracy_entries(self.predicted, self.observed)

  def scored(self, truth):
    true = {cid: np.asarray(truth.true_labels[cid])[self.positions[cid]]
            for cid in self.predicted}
    entries = accuracy_entries(self.predicted, true)
    if entries:
      observed = accuracy_entries(self.predicted, self.observed)
      entries[RECORD]['accuracy_observed_labels'] = observed[PERSONALIZED_ACCURACY]
    return entries
