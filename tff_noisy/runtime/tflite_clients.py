"""``fl.client_runtime: tflite``: every sampled client's round runs in the TFLite
interpreter on the exported on-device training model; the server side stays TFF.

``TFLiteClients`` is a client runtime (``FederatedProcess.clients``): ``train`` runs each
client's round through ``tflite_export.device_client.DeviceClient`` (restore the broadcast
weights, the client parts' start on the device, ``local_epochs`` passes of ``train`` over
the client's batches in the dataset's order, ``upload``) and returns the same
``ClientResult`` values and training metrics as the TFF client work. The process feeds
them to its own ``aggregate`` (the configured aggregator and the finalizer), as for
every runtime, so a method's server step (FedDS's weights) works on devices too.

A device's update with a non-finite value is zeroed with weight 0 on the device (its
``upload``, as TFF's client work does), checked again here, and counted in
``non_finite_clients``. Simulated faults are TFF-only.
"""

import numpy as np

from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_work
from tff_noisy.tff_runtime import import_tff
from tflite_export import device_client
from tflite_export import training

tff = import_tff()


class TFLiteClients:
  """A client runtime whose clients train in the TFLite interpreter."""

  name = 'tflite'

  def __init__(self, model_fn, optimizer, program, *, local_epochs: int,
               weight_decay: float, faults: bool = False):
    if faults:
      raise ConfigError('fl.client_runtime: tflite does not simulate faults (faults:); '
                        'use fl.client_runtime: tff')
    training.check_program(program)
    self.program = program
    self.local_epochs = int(local_epochs)
    module = training.build_training_module(
        model_fn(), program, optimizer, local_epochs=self.local_epochs,
        weight_decay=weight_decay)
    self.tflite_bytes = training.convert_training_module(module)
    self.client = device_client.DeviceClient(self.tflite_bytes)

  def describe(self) -> dict:
    """What results.json keeps of this runtime."""
    return {'client_runtime': self.name, 'clients_trained_on': 'TFLite interpreter (CPU)',
            'path': 'one interpreter run per client'}

  def train(self, weights, hparams, client_data: list, client_states: list,
            faults=None) -> tuple:
    """Each client's round on the device: ``(ClientResults, metrics, client states, {})``."""
    if faults is not None:
      raise ConfigError('fl.client_runtime: tflite does not simulate faults')
    flat = list(weights.trainable) + list(weights.non_trainable)
    num_trainable = len(weights.trainable)
    hparams = {name: np.asarray(value) for name, value in hparams.items()}
    metric_names = self.program.metric_names
    results, per_client = [], []
    for client in client_data:
      dataset = client_data_lib.as_dataset(client)
      upload = self.client.run_round(
          flat, dataset.repeat(self.local_epochs).as_numpy_iterator(), hparams)
      update = upload.update
      finite = not upload.non_finite and all(np.all(np.isfinite(u)) for u in update)
      result, metrics = client_work.client_outcome(
          tff.learning.models.ModelWeights(trainable=update[:num_trainable],
                                           non_trainable=update[num_trainable:]),
          upload.update_weight, loss_sum=upload.loss_sum, correct=upload.correct,
          num_examples=upload.num_examples, finite=finite,
          objective_metrics=(self.program.device_metrics(upload.prologue)
                             if metric_names else None))
      results.append(result)
      per_client.append(metrics)
    return (results, client_work.finalize_client_metrics(
        client_work.summed_client_metrics(per_client)), list(client_states), {})
