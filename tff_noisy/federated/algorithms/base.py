"""``Method``: a learning process plus the driver hooks a method may need around it.

Hooks: client-side preparation once before training (NNC relabelling), the labels and
extra per-example inputs of a client's dataset (NA-FedAvg's ``aggregation_weight``), and
work before a round (NA-FedAvg's noise estimation). FedAvg and FedProx use none of them.
The driver knows a method only through this interface.
"""

import numpy as np


class Method:
  """A method's learning process and driver hooks (the defaults are plain FedAvg)."""

  # Extra per-example dataset fields {name: numpy dtype} that the process expects.
  extra_fields: dict = {}

  def __init__(self, process):
    self.process = process

  @classmethod
  def build(cls, params: dict, model_fn, element_spec, client_optimizer, server_optimizer,
            *, local_epochs: int, seed: int, rounds: int):
    raise NotImplementedError

  def prepare(self, data, store) -> dict:
    """Runs once before training; returns diagnostics for ``results.extra``."""
    del data, store
    return {}

  def labels(self, client_id: str, data, store) -> np.ndarray:
    """The labels a client trains on: corrected ones if the method stored them."""
    return store.get(client_id, 'labels', data.y[client_id])

  def client_extras(self, client_id: str, num_examples: int, store) -> dict:
    """Per-example extra inputs of a client's dataset, matching ``extra_fields``."""
    del client_id, num_examples, store
    return {}

  def all_clients_in_round(self, round_num: int) -> bool:
    del round_num
    return False

  def before_round(self, round_num: int, state, datasets_fn, store) -> dict:
    """Work before the round; ``datasets_fn()`` builds {client id: dataset}; diagnostics."""
    del round_num, state, datasets_fn, store
    return {}

  def run_round(self, state, datasets: dict) -> tuple:
    """One round on {client id: dataset}; returns (new state, metrics, diagnostics)."""
    output = self.process.next(state, list(datasets.values()))
    return output.state, round_metrics(output.metrics), {}


def round_metrics(metrics) -> dict:
  """The driver's per-round training metrics from a composed process's measurements."""
  train = metrics['client_work']['train']
  return {
      'train_loss': float(train['loss']),
      'train_accuracy': float(train['accuracy']),
      'non_finite_clients': int(train['non_finite_clients']),
      'update_rejected': int(metrics['finalizer']['update_non_finite']),
  }
