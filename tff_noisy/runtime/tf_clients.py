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
  of models without convolutions (which the vectorisation runs client by client). The
  next group's batches are cut while a group trains, and the groups' updates stay
  stacked, in client order, for the in-process aggregation (``ClientResults``).
- **one call per client**: the kernel itself, for the client programs and models that cannot
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
import concurrent.futures
from typing import Optional

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_work
from tff_noisy.federated.aggregators import common as aggregator_common
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


def why_not_stacked(model: tf.keras.Model, program, stack: Optional[bool], device: str,
                    median_client_steps: Optional[int]) -> str:
  """Why this runtime trains one call per client ('' to stack; module doc)."""
  if stack is False:
    return 'fl.stack_clients: false'
  reason = stacked.unstackable_reason(model, program)
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


def _as_sent(stacked_update, faults: list) -> tuple:
  """``(stacked update, finite bool[C])`` as the clients send them: a simulated fault
  corrupts its client's row before the non-finite check, as the kernel of one client
  corrupts its own update, and a non-finite row is zeroed (the rule of
  ``client_work.client_outcome``). ``faults``: one per row."""
  flat = tf.nest.flatten(stacked_update)
  faulty = [c for c, fault in enumerate(faults)
            if fault is not None and int(fault['kind']) != faults_lib.HONEST]
  if faulty:
    rows = [tf.nest.flatten(faults_tf.corrupt([t[c] for t in flat], faults[c]))
            for c in faulty]
    flat = [tf.tensor_scatter_nd_update(t, np.array(faulty)[:, None],
                                        tf.stack([row[i] for row in rows]))
            for i, t in enumerate(flat)]
  finite = aggregator_common.finite_rows(flat).numpy()
  if not finite.all():
    zeroed = np.flatnonzero(~finite)[:, None]
    flat = [tf.tensor_scatter_nd_update(
        t, zeroed, tf.zeros((len(zeroed),) + tuple(t.shape[1:]), t.dtype)) for t in flat]
  return tf.nest.pack_sequence_as(stacked_update, flat), finite


class InProcessClients:
  """A client runtime (``FederatedProcess.clients``) running in this process."""

  name = 'tf'

  def __init__(self, model_fn, optimizer, program, *, local_epochs: int,
               weight_decay: float, batch_size: int,
               clients_per_call: Optional[int] = None, stack: Optional[bool] = None,
               median_client_steps: Optional[int] = None):
    """``stack``: ``fl.stack_clients``; ``median_client_steps``: the median client's steps
    a round (``why_not_stacked``)."""
    self.local_epochs = int(local_epochs)
    self.batch_size = int(batch_size)
    self.device = training_device()
    model = model_fn()
    self.unstacked_reason = why_not_stacked(model, program, stack, self.device,
                                            median_client_steps)
    self.stacked = not self.unstacked_reason
    num_weights = sum(int(np.prod(v.shape)) for v in model.variables)
    self.clients_per_call = int(clients_per_call or max(1, min(
        MAX_AUTO_CLIENTS_PER_CALL, AUTO_STACK_BYTES // (16 * max(num_weights, 1)))))
    self._program = program
    if self.stacked:
      self._stacked_kernel = stacked.shared_stacked_training(model, optimizer, program,
                                                             weight_decay)
    else:
      self._kernel = client_work.build_local_training(model, optimizer, program,
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
    if self.stacked:  # Stacked client parts keep no client state.
      results, sums, diagnostics = self._train_stacked(weights, hparams, client_data, faults)
      new_states = list(client_states)
    else:
      outcomes, new_states = self._train_each(weights, hparams, client_data, client_states,
                                              faults)
      results = client_work.ClientResults([result for result, _ in outcomes])
      sums = client_work.summed_client_metrics([metrics for _, metrics in outcomes])
      diagnostics = {}
    return results, client_work.finalize_client_metrics(sums), new_states, diagnostics

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
    """Groups of stacked clients: ``(ClientResults, summed metrics, diagnostics)``. The
    updates stay stacked, as row blocks in client order (``ClientResults.stacked_blocks``,
    which the in-process aggregation reads), and each client's update is a view of its
    row."""
    clients = list(client_data)
    if not all(isinstance(c, client_data_lib.ClientData) for c in clients):
      raise TypeError('the stacked tf runtime needs ClientData (client_data.ClientData), '
                      'not tf.data datasets')
    steps = [client_data_lib.steps_per_pass(c.num_examples, self.batch_size) for c in clients]
    order = sorted(range(len(clients)), key=lambda i: steps[i])
    prologue_pass = stacked.prologue_pass(self._program, hparams)

    def batches_of(group):
      return stacked.stack_round([clients[i] for i in group], self.batch_size,
                                 self.local_epochs, prologue_pass)

    groups, outputs = [], []  # Each group's clients and its kernel's outputs.
    diagnostics = {}
    start = 0
    # The next group's batches are cut in a thread while the kernel trains this group
    # (10,000 digits clients: 4.6 -> 3.6 s a round, benchmarks/scale.py's setting).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
      upcoming = None  # (group, its batches' future)
      while start < len(order):
        group = order[start:start + self.clients_per_call]
        if upcoming is None or upcoming[0] != group:
          upcoming = group, pool.submit(batches_of, group)
        batches = upcoming[1].result()
        following = order[start + len(group):start + len(group) + self.clients_per_call]
        upcoming = (following, pool.submit(batches_of, following)) if following else None
        try:
          outputs.append(self._stacked_kernel(weights, hparams, *batches))
        except tf.errors.ResourceExhaustedError:
          if self.clients_per_call == 1:
            raise
          self.clients_per_call = max(1, self.clients_per_call // 2)
          diagnostics['clients_per_call'] = self.clients_per_call
          diagnostics['clients_per_call_halved'] = (
              'a group of clients did not fit in memory; halved to '
              f'{self.clients_per_call} (set fl.clients_per_call to choose)')
          continue
        groups.append(np.array(group, np.int32))
        start += len(group)
    return (*self._outcomes(groups, outputs, faults or [None] * len(clients)), diagnostics)

  def _outcomes(self, groups: list, outputs: list, faults: list) -> tuple:
    """``(ClientResults, summed metrics)`` of the clients from their groups' kernel
    outputs, by the rule of ``client_work.client_outcome`` for all clients at once. When
    the groups hold the clients in order, their updates stay the groups' own tensors
    (``ClientResults.stacked_blocks``), else they are stitched into client order."""
    rows = np.concatenate(groups)
    if np.array_equal(rows, np.arange(len(rows))):  # Already in client order.
      blocks = [update for update, _, _ in outputs]
    else:
      blocks = [tf.nest.map_structure(lambda *parts: tf.dynamic_stitch(groups, parts),
                                      *[update for update, _, _ in outputs])]
    starts = np.cumsum([0] + [_num_rows(block) for block in blocks])
    sent = [_as_sent(block, faults[start:end])
            for block, start, end in zip(blocks, starts[:-1], starts[1:])]
    blocks = [block for block, _ in sent]
    finite = np.concatenate([block_finite for _, block_finite in sent])

    def in_client_order(*parts):
      joined = np.concatenate(parts)
      merged = np.empty_like(joined)
      merged[rows] = joined
      return merged

    sums, objective_metrics = tf.nest.map_structure(
        in_client_order, *[_to_numpy((s, m)) for _, s, m in outputs])
    metrics = client_work.client_metrics(
        loss_sum=sums['loss_sum'], correct=sums['correct'],
        num_examples=sums['num_examples'], finite=finite,
        objective_metrics={name: objective_metrics[name]
                           for name in self._program.metric_names})
    update_weights = np.where(finite, sums['weight_sum'] / self.local_epochs, 0).astype(
        np.float32)
    return (client_work.ClientResults.of_blocks(blocks, update_weights),
            tf.nest.map_structure(lambda v: v.sum(axis=0, dtype=v.dtype), metrics))


def _num_rows(stacked_update) -> int:
  return int(tf.nest.flatten(stacked_update)[0].shape[0])
