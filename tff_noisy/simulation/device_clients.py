"""``fl.client_runtime: tflite``: every sampled client's round runs in the TFLite
interpreter on the exported on-device training model; the server side stays TFF.

``TFLiteClients`` wraps a method's ``FederatedProcess``: ``train_clients`` runs each
client's round through ``tflite_export.device_client.DeviceClient`` (restore the broadcast
weights, the objective's prologue on the device, ``local_epochs`` passes of ``train`` over
the client's batches in the dataset's order, ``upload``) and returns the same
``ClientResult`` values and finalized training metrics as the TFF client work; ``next``
feeds the uploads to the process's own ``aggregate`` computation (the configured
aggregator and the finalizer), as FedDS's split round does. Everything else (``initialize``,
``aggregate``, hparams accessors) is the wrapped process's, so a method's own
``run_round`` (FedDS) trains its clients on the device too.

A device's update with a non-finite value is zeroed with weight 0 on the device (its
``upload``, as TFF's client work does), checked again here, and counted in
``non_finite_clients``. Simulated faults are TFF-only.
"""

import collections

import numpy as np

from tff_noisy.errors import ConfigError
from tff_noisy.federated import process as process_lib
from tff_noisy.ops import transition
from tff_noisy.tff_runtime import import_tff
from tflite_export import device_client
from tflite_export import training

tff = import_tff()

RUNTIMES = ('tff', 'tflite')


def _finalize(sums: dict, metric_names) -> collections.OrderedDict:
  """``client_work.build_finalize_client_metrics`` on the clients' summed metrics."""
  examples = max(float(sums['num_examples']), 1.0)
  clients = max(float(sums['finite_clients']), 1.0)
  metrics = collections.OrderedDict(
      loss=np.float32(sums['loss_sum'] / examples),
      accuracy=np.float32(sums['correct'] / examples),
      client_mean_accuracy=np.float32(sums['client_accuracy_sum'] / clients),
      num_examples=np.int64(sums['num_examples']),
      non_finite_clients=np.int32(sums['non_finite_clients']))
  if metric_names:
    metrics['objective'] = collections.OrderedDict(
        (name, np.float32(sums['objective'][name] / clients)) for name in metric_names)
  return metrics


class TFLiteClients:
  """A ``FederatedProcess`` whose clients train in the TFLite interpreter."""

  def __init__(self, process: process_lib.FederatedProcess, setup):
    if setup.faults:
      raise ConfigError('fl.client_runtime: tflite does not simulate faults (faults:); '
                        'use fl.client_runtime: tff')
    training.check_objective(process.objective)
    self._process = process
    self.local_epochs = int(setup.local_epochs)
    model = setup.model_fn()
    module = training.build_training_module(
        model, process.objective, setup.client_optimizer, local_epochs=self.local_epochs,
        weight_decay=setup.weight_decay)
    self.tflite_bytes = training.convert_training_module(module)
    self.client = device_client.DeviceClient(self.tflite_bytes)

  def __getattr__(self, name):
    return getattr(self._process, name)

  def _objective_metrics(self, upload) -> dict:
    prologue = upload.prologue
    values = {'received_accuracy': float(prologue.get('received_accuracy', 0.0)),
              'matrix_clipped_columns': float(prologue.get('matrix_clipped_columns', 0.0)),
              'matrix_singular': 0.0}
    if 'estimated' in prologue:
      values['matrix_singular'] = float(transition.is_singular(prologue['estimated']))
    return {name: values[name] for name in self._process.objective.metric_names}

  def train_clients(self, weights, hparams, client_data: list, client_states: list,
                    faults=None) -> tuple:
    """Each client's round on the device: ``(ClientResults, metrics, client states)``."""
    if faults is not None:
      raise ConfigError('fl.client_runtime: tflite does not simulate faults')
    flat = list(weights.trainable) + list(weights.non_trainable)
    num_trainable = len(weights.trainable)
    corrected = int(hparams['corrected']) if 'corrected' in hparams else None
    metric_names = self._process.objective.metric_names
    sums = collections.defaultdict(float)
    sums['objective'] = collections.defaultdict(float)
    results = []
    for dataset in client_data:
      upload = self.client.run_round(
          flat, dataset.repeat(self.local_epochs).as_numpy_iterator(), corrected)
      update, weight = upload.update, upload.update_weight
      non_finite = upload.non_finite or not all(np.all(np.isfinite(u)) for u in update)
      if non_finite:
        update, weight = [np.zeros_like(u) for u in update], 0.0
      results.append(tff.learning.templates.ClientResult(
          update=tff.learning.models.ModelWeights(trainable=update[:num_trainable],
                                                  non_trainable=update[num_trainable:]),
          update_weight=np.float32(weight)))
      sums['non_finite_clients'] += int(non_finite)
      if non_finite:
        continue
      sums['loss_sum'] += upload.loss_sum
      sums['correct'] += upload.correct
      sums['num_examples'] += upload.num_examples
      sums['client_accuracy_sum'] += upload.correct / max(upload.num_examples, 1)
      sums['finite_clients'] += 1
      for name, value in self._objective_metrics(upload).items():
        sums['objective'][name] += value
    return results, _finalize(sums, metric_names), list(client_states)

  def next(self, state, client_data: list, client_states: list,
           faults=None) -> process_lib.RoundOutput:
    """One round: the clients on the device, then the process's ``aggregate``."""
    weights = self._process.get_model_weights(state)
    results, train_metrics, client_states = self.train_clients(
        weights, self._process.get_hparams(state), client_data, client_states, faults)
    aggregator_state, finalizer_state, new_weights, measurements = self._process.aggregate(
        state.aggregator, state.finalizer, weights, [r.update for r in results],
        [r.update_weight for r in results])
    new_state = state._replace(global_model_weights=new_weights,
                               aggregator=aggregator_state, finalizer=finalizer_state)
    metrics = collections.OrderedDict(client_work={'train': train_metrics},
                                      **measurements)
    return process_lib.RoundOutput(new_state, metrics, client_states)
