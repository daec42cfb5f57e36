"""``fl.client_runtime: tf``: the round's clients train in the driver's own TensorFlow.

The same client kernel as TFF's client work (``client_work.build_local_training``), run
in this process instead of TFF's CPU-only ``worker_binary``: on the GPU when the run's
``device`` gives TensorFlow one, and without serialising every client's dataset into a
TFF computation. Aggregation stays the process's ``aggregate`` (the configured
aggregator and finalizer), as for every runtime.

Two paths, chosen once when the runtime is built (``fl.stack_clients``; ``results.json``
keeps the path and, for one call per client, why):

- **stacked** (``runtime.stacked``): groups of up to ``fl.clients_per_call`` clients
  train in one graph call, on a leading client axis. Clients are sorted by their number
  of steps before grouping, so little is padded. A group that does not fit in memory is
  halved and retried; the round's record says so (``clients_per_call``). It saves the
  per-call overheads of many small clients, but on the CPU a stacked step costs more per
  client than one client's step, so by default (``fl.stack_clients: null``) a CPU stacks
  only clients whose median takes at most ``CPU_MAX_STACKED_CLIENT_STEPS`` steps a round,
  of models without convolutions (which the vectorisation runs client by client).
- **one call per client**: the kernel itself, for the objectives and models that cannot
  be stacked exactly (``stacked.unstackable_reason``), for clients of more steps on the
  CPU, and with ``fl.stack_clients: false``. Clients run one after another: with a
  thread (and a model) per core, two pooled_cnn clients at once ran MaskedOptim's
  Fashion-MNIST round 1.2-1.4x slower than TFF, one at a time 0.8x
  (``benchmarks/method_cost.py``), since each call already uses every core.

A simulated Byzantine client's update is corrupted (``ops.faults_tf.corrupt``) before
the non-finite check, as in TFF's client work; a non-finite update is zeroed, weighted 0,
keeps the client's old state and is counted in ``non_finite_clients``.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_work
from tff_noisy.ops import faults as faults_lib
from tff_noisy.ops import faults_tf
from tff_noisy.runtime import stacked
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

# Stacked clients per call when fl.clients_per_call is not set: as many as keep about
# this many bytes of per-client weights (each client holds ~4 copies: weights, optimiser
# state, gradients, update), at most MAX_AUTO_CLIENTS_PER_CALL.
AUTO_STACK_BYTES = 512 * 2**20
MAX_AUTO_CLIENTS_PER_CALL = 1024
# fl.stack_clients: null on the CPU stacks the clients of a run whose median client takes at
# most this many steps a round (local epochs x batches). Measured by benchmarks/stacking.py.
CPU_MAX_STACKED_CLIENT_STEPS = 50
# Layers that tf.vectorized_map runs one client at a time, in a loop inside the graph: on
# the CPU a stacked round of pooled_cnn clients took 1.6x one call per client
# (benchmarks/stacking.py on fedefc_fmnist.yaml's 10 clients of 20 steps).
_LOOPED_WHEN_STACKED = (tf.keras.layers.Conv1D, tf.keras.layers.Conv2D,
                        tf.keras.layers.Conv3D, tf.keras.layers.DepthwiseConv2D,
                        tf.keras.layers.SeparableConv1D, tf.keras.layers.SeparableConv2D)


def training_device() -> str:
  """Where this process's TensorFlow places the clients' training: 'GPU:0' or 'CPU'."""
  gpus = tf.config.list_logical_devices('GPU')
  return gpus[0].name.replace('/device:', '') if gpus else 'CPU'


def why_not_stacked(model: tf.keras.Model, objective, stack: Optional[bool], device: str,
                    median_client_steps: Optional[int]) -> str:
  """Why this runtime trains one call per client ('' to stack; module doc)."""
  if stack is False:
    return 'fl.stack_clients: false'
  reason = stacked.unstackable_reason(model, objective)
  if reason or stack or device != 'CPU':
    return reason
  looped = [layer.name for layer in model.submodules if isinstance(layer, _LOOPED_WHEN_STACKED)]
  if looped:
    return (f'on the CPU, stacked convolutions ({looped[0]}) run one client at a time and '
            'train slower than one call per client (fl.stack_clients: true stacks)')
  if median_client_steps is None:
    return ''
  if median_client_steps > CPU_MAX_STACKED_CLIENT_STEPS:
    return (f'on the CPU, clients of {median_client_steps} steps a round (the median) '
            f'train faster one call each than stacked (above {CPU_MAX_STACKED_CLIENT_STEPS}; '
            'fl.stack_clients: true stacks)')
  return ''


def _to_numpy(structure):
  return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, 'numpy') else t, structure)


def _all_finite(arrays) -> bool:
  """Whether every value of a client's arrays is finite."""
  return all(np.isfinite(a).all() for a in arrays)


def _finite_per_client(stacked_arrays) -> np.ndarray:
  """bool[C]: ``_all_finite`` of each client's slice of arrays stacked on axis 0."""
  return np.all([np.isfinite(a).reshape(len(a), -1).all(axis=1) for a in stacked_arrays],
                axis=0)


def _as_sent(update, finite: bool, fault) -> tuple:
  """``(update, finite)`` of a stacked client after its simulated fault: a corrupted
  update is checked as it is sent (the kernel of one client corrupts its own)."""
  if fault is not None and int(fault['kind']) != faults_lib.HONEST:
    update = _to_numpy(faults_tf.corrupt(update, fault))
    finite = _all_finite(tf.nest.flatten(update))
  return update, finite


class InProcessClients:
  """A client runtime (``FederatedProcess.clients``) running in this process."""

  name = 'tf'

  def __init__(self, model_fn, optimizer, objective, *, local_epochs: int,
               weight_decay: float, batch_size: int,
               clients_per_call: Optional[int] = None, stack: Optional[bool] = None,
               median_client_steps: Optional[int] = None):
    """``stack``: ``fl.stack_clients``; ``median_client_steps``: the median client's steps
    a round (``why_not_stacked``)."""
    self.local_epochs = int(local_epochs)
    self.batch_size = int(batch_size)
    self.device = training_device()
    model = model_fn()
    self.unstacked_reason = why_not_stacked(model, objective, stack, self.device,
                                            median_client_steps)
    self.stacked = not self.unstacked_reason
    num_weights = sum(int(np.prod(v.shape)) for v in model.variables)
    self.clients_per_call = int(clients_per_call or max(1, min(
        MAX_AUTO_CLIENTS_PER_CALL, AUTO_STACK_BYTES // (16 * max(num_weights, 1)))))
    self._objective = objective
    if self.stacked:
      self._stacked_kernel = stacked.build_stacked_training(model, optimizer, objective,
                                                            weight_decay)
    else:
      self._kernel = client_work.build_local_training(model, optimizer, objective,
                                                      self.local_epochs, weight_decay,
                                                      model_fn)

  def describe(self) -> dict:
    """What results.json keeps of this runtime."""
    record = {'client_runtime': self.name, 'clients_trained_on': self.device,
              'path': 'stacked' if self.stacked else 'one call per client'}
    if self.stacked:
      record['clients_per_call'] = self.clients_per_call
    else:
      record['why_not_stacked'] = self.unstacked_reason
    return record

  def train(self, weights, hparams, client_data: list, client_states: list,
            faults: Optional[list] = None) -> tuple:
    """``(ClientResults, finalized metrics, client states, diagnostics)`` of the round."""
    hparams = collections.OrderedDict(
        (name, tf.convert_to_tensor(value)) for name, value in hparams.items())
    weights = tf.nest.map_structure(tf.convert_to_tensor, weights)
    diagnostics = {}
    if self.stacked:  # Stacked objectives keep no client state.
      outcomes, diagnostics = self._train_stacked(weights, hparams, client_data, faults)
      new_states = list(client_states)
    else:
      outcomes, new_states = self._train_each(weights, hparams, client_data, client_states,
                                              faults)
    results = [result for result, _ in outcomes]
    return (results, client_work.finalize_client_metrics(
        client_work.summed_client_metrics([metrics for _, metrics in outcomes])),
            new_states, diagnostics)

  def _train_each(self, weights, hparams, client_data, client_states, faults) -> tuple:
    """One kernel call per client: ``([(ClientResult, metrics)], new states)``; the kernel
    applied the fault and the non-finite rule (``client_work.build_local_training``)."""
    outcomes, new_states = [], []
    for c, (client, state) in enumerate(zip(client_data, client_states)):
      fault = () if faults is None else (faults[c],)
      result, metrics, new_state = self._kernel(
          weights, client_data_lib.as_dataset(client), state, hparams, *fault)
      outcomes.append((tff.learning.templates.ClientResult(
          update=_to_numpy(result.update), update_weight=np.float32(result.update_weight)),
                       _to_numpy(metrics)))
      new_states.append(_to_numpy(new_state))
    return outcomes, new_states

  def _train_stacked(self, weights, hparams, client_data, faults) -> tuple:
    """Groups of stacked clients; ``([(ClientResult, metrics)] in client order,
    diagnostics)``."""
    clients = list(client_data)
    if not all(isinstance(c, client_data_lib.ClientData) for c in clients):
      raise TypeError('the stacked tf runtime needs ClientData (client_data.ClientData), '
                      'not tf.data datasets')
    steps = [client_data_lib.steps_per_pass(c.num_examples, self.batch_size) for c in clients]
    order = sorted(range(len(clients)), key=lambda i: steps[i])
    out = [None] * len(clients)
    diagnostics = {}
    start = 0
    while start < len(order):
      group = order[start:start + self.clients_per_call]
      try:
        trained = self._train_group(weights, hparams, [clients[i] for i in group],
                                    [faults[i] if faults else None for i in group])
      except tf.errors.ResourceExhaustedError:
        if self.clients_per_call == 1:
          raise
        self.clients_per_call = max(1, self.clients_per_call // 2)
        diagnostics['clients_per_call'] = self.clients_per_call
        diagnostics['clients_per_call_halved'] = (
            'a group of clients did not fit in memory; halved to '
            f'{self.clients_per_call} (set fl.clients_per_call to choose)')
        continue
      for i, result in zip(group, trained):
        out[i] = result
      start += len(group)
    return out, diagnostics

  def _train_group(self, weights, hparams, group: list, faults: list) -> list:
    """One stacked call on ``group``; each client's ``client_work.client_outcome``."""
    updates, sums, objective_metrics = _to_numpy(self._stacked_kernel(
        weights, hparams, *stacked.stack_round(group, self.batch_size, self.local_epochs,
                                               stacked.prologue_pass(self._objective,
                                                                     hparams))))
    trainable, non_trainable = updates.trainable, updates.non_trainable
    finite = _finite_per_client(list(trainable) + list(non_trainable))
    trained = []
    for c, fault in enumerate(faults):
      update, sent_finite = _as_sent(client_work.model_weights_of_values(
          [t[c] for t in trainable], [t[c] for t in non_trainable]), bool(finite[c]), fault)
      trained.append(client_work.client_outcome(
          update, sums['weight_sum'][c] / self.local_epochs, loss_sum=sums['loss_sum'][c],
          correct=sums['correct'][c], num_examples=int(sums['num_examples'][c]),
          finite=sent_finite, objective_metrics={
              name: objective_metrics[name][c] for name in self._objective.metric_names}))
    return trained
