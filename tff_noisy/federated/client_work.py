"""The one client work every method trains with: local training on a ``ClientProgram``.

Client datasets are batched mappings with keys ``x``, ``y`` and ``index`` (the example's
position in the client's data) and, optionally, ``aggregation_weight`` (one float per
example) plus any per-example fields a method's client parts read. The client's
``update_weight`` is the sum of ``aggregation_weight`` over one pass of its data, or its
number of examples when the key is absent; a method that weights clients (NA-FedAvg:
``1 - n_hat``) sets the per-example value and needs no client work of its own.

A client receives the global weights, its dataset, its own state (declared by its client
parts' ``state_spec``; ``()`` for stateless parts) and the round's hparams,
and returns its ``ClientResult``, summable metrics and its new state. The update is the
difference between the received and the trained weights for the trainable *and* the
non-trainable variables, so BatchNorm statistics are averaged with the same weights as
everything else. The client side of every method is its ``ClientProgram``, an ordered
list of client parts (``federated.client_parts``), which this kernel runs. A client whose
update has a non-finite value sends zeros with weight 0,
keeps its old state and is counted in ``non_finite_clients``; the finalizer also refuses
a non-finite aggregate. With simulated faults (``faults:``), each client also receives
its fault (``ops.faults_tf.FAULT_SPEC``) and a Byzantine client's update is corrupted
(``ops.faults_tf.corrupt``) after training and before that check, so a ``nan`` client is
one more non-finite client. What the parts send beside the update
(``ClientContext.send``: SCAFFOLD's Δc_i) is summed over the clients whose update was finite
into the round's training metrics under ``outputs``.
"""

import collections
import collections.abc
import functools
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

import models
from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_step
from tff_noisy.federated.aggregators import common as aggregator_common
from tff_noisy.federated.client_parts import ClientContext, ClientProgram
from tff_noisy.ops import faults_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

AGGREGATION_WEIGHT_KEY = 'aggregation_weight'
INDEX_KEY = 'index'
OBJECTIVE_METRICS_KEY = 'objective'  # The parts' own per-client metrics.
OUTPUTS_KEY = 'outputs'  # What the parts send the server beside the update, summed.


def model_weights_of(model: tf.keras.Model):
  """The model's variables as ``tff.learning.models.ModelWeights``."""
  return tff.learning.models.ModelWeights(
      trainable=list(model.trainable_variables),
      non_trainable=list(model.non_trainable_variables))


def restore_eager_model_classes(model_fn: Callable[[], tf.keras.Model]) -> None:
  """Builds one model eagerly, after TFF has traced models in a graph.

  Keras 2 rebases a model class onto its v1 variant when one is built in a graph (as TFF
  tracing does), which breaks eager models of that class the caller already holds;
  building one eagerly rebases it back. Call after building TFF computations.
  """
  model_fn()


def model_weights_of_values(trainable, non_trainable):
  """``ModelWeights`` of the given per-variable values (tensors or arrays)."""
  return tff.learning.models.ModelWeights(trainable=list(trainable),
                                          non_trainable=list(non_trainable))


def weights_type_of(model_fn: Callable[[], tf.keras.Model]):
  with tf.Graph().as_default():
    weights = model_weights_of(model_fn())
    return tff.types.tensorflow_to_type(
        tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), weights))


def state_type_of(program: ClientProgram):
  """The TFF type of a client's state under ``program`` (``<>`` when it keeps none)."""
  return tff.types.tensorflow_to_type(collections.OrderedDict(program.state_spec))


def hparams_type_of(program: ClientProgram):
  """The TFF type of the server-decided values broadcast to clients each round."""
  return tff.types.tensorflow_to_type(collections.OrderedDict(
      (name, tf.TensorSpec(value.shape, value.dtype))
      for name, value in program.hparams.items()))


def inference_pass(predict, dataset):
  """The logits ``predict(x)`` [N, num classes] and labels [N] of every example of
  ``dataset``, in one pass in its order, batch by batch."""

  def collect(arrays, batch):
    logits, labels = arrays
    return (logits.write(logits.size(), predict(batch['x'])),
            labels.write(labels.size(), tf.cast(batch['y'], tf.int64)))

  empty = (tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False),
           tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False))
  logits, labels = dataset.reduce(empty, collect)
  return logits.concat(), tf.reshape(labels.concat(), [-1])


def received_pass(program: ClientProgram, predict, dataset, hparams) -> tuple:
  """``(logits, labels)`` of the received model on the client's examples when a part
  reads them (``Needs.received_logits``), in one pass; ``(None, None)`` when none does,
  and empty ``[0, 0]``, ``[0]`` in rounds none reads them (no pass, no shuffle drawn)."""
  if not program.reads_received_logits():
    return None, None
  needed = program.received_logits_needed(hparams)
  if needed is True:
    return inference_pass(predict, dataset)
  return tf.cond(needed, lambda: inference_pass(predict, dataset),
                 lambda: (tf.zeros([0, 0]), tf.zeros([0], tf.int64)))


def _batch_sums(batch, per_example, logits) -> tuple:
  """``(loss sum, correct, examples, aggregation weight)`` of one step's batch."""
  batch_size = tf.shape(batch['y'])[0]
  if AGGREGATION_WEIGHT_KEY in batch:
    weight = tf.reduce_sum(tf.cast(batch[AGGREGATION_WEIGHT_KEY], tf.float32))
  else:
    weight = tf.cast(batch_size, tf.float32)
  predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
  correct = tf.reduce_sum(tf.cast(tf.equal(predicted, tf.cast(batch['y'], tf.int64)),
                                  tf.float32))
  return tf.reduce_sum(per_example), correct, tf.cast(batch_size, tf.int64), weight


def _client_result(program, ctx, initial_weights, weights, state, sums, local_epochs,
                   fault):
  """``(ClientResult, metrics, state)`` after the parts' ``finish``: the update (scaled,
  a fault's corruption, zeroed when non-finite), the summable metrics and the new state
  (the old one when the update is not finite)."""
  loss_sum, correct, num_examples, weight_sum = sums
  update = tf.nest.map_structure(lambda w, t: (w - t) * ctx.update_scale, initial_weights,
                                 weights)
  if fault is not None:
    update = faults_tf.corrupt(update, fault)
  update, non_finite = client_step.zero_if_any_non_finite(update)
  new_state = state
  if program.state_spec:
    new_state = tf.nest.map_structure(
        lambda new, old: tf.where(non_finite, old, new),
        collections.OrderedDict((name, ctx.state[name]) for name in state), state,
        check_types=False)
  keep = lambda value: tf.where(non_finite, tf.zeros_like(value), value)  # pylint: disable=unnecessary-lambda-assignment
  accuracy = correct / tf.maximum(tf.cast(num_examples, tf.float32), 1.0)
  metrics = collections.OrderedDict(
      loss_sum=keep(loss_sum), correct=keep(correct), num_examples=keep(num_examples),
      non_finite_clients=tf.cast(non_finite, tf.int32), client_accuracy_sum=keep(accuracy),
      finite_clients=tf.cast(tf.logical_not(non_finite), tf.int32))
  if program.metric_names:
    metrics[OBJECTIVE_METRICS_KEY] = collections.OrderedDict(
        (name, keep(tf.cast(ctx.metrics[name], tf.float32))) for name in program.metric_names)
  if ctx.outputs:
    metrics[OUTPUTS_KEY] = collections.OrderedDict(
        (name, keep(value)) for name, value in sorted(ctx.outputs.items()))
  update_weight = tf.where(non_finite, 0.0, weight_sum / float(local_epochs))
  result = tff.learning.templates.ClientResult(update=update, update_weight=update_weight)
  return result, metrics, new_state


def build_local_training(model: tf.keras.Model, optimizer, program: ClientProgram,
                         local_epochs: int, weight_decay: float = 0.0,
                         model_fn: Optional[Callable[[], tf.keras.Model]] = None):
  """Returns a tf.function ``(weights, dataset, state, hparams[, fault]) -> (result,
  metrics, state)``: one client's round of the program's parts.

  From the received weights: the parts' ``start``, ``local_epochs`` passes of
  ``client_step.train_step`` on each batch as the parts' ``batch`` gives it (the
  optimiser on the parts' mean per-example loss plus the model's regularisation losses,
  the parts' gradient terms and the coupled L2 ``weight_decay``), the parts' ``finish``.
  A ``fault`` (``ops.faults_tf.FAULT_SPEC``) corrupts the update the client sends.
  ``model_fn`` builds the frozen copies the parts name (``Needs.reference_models``).
  """
  weights = model_weights_of(model)
  feature_model = models.features_and_logits(model) if program.uses_features else None
  if program.reference_models and model_fn is None:
    raise ValueError(f'client parts keep frozen copies of the model '
                     f'{program.reference_models}: build_local_training needs model_fn')
  copies = {name: model_fn() for name in program.reference_models}
  references = {name: (model_weights_of(copy), functools.partial(
      models.features_and_logits(copy), training=False)) for name, copy in copies.items()}

  def predict(x):
    return model(x, training=False)

  def forward(x):
    if feature_model is None:
      return None, model(x, training=True)
    return feature_model(x, training=True)

  # In process, clients' per-example state differs in rows: one trace for every size.
  @tf.function(reduce_retracing=True)
  def train(initial_weights, dataset, state, hparams, fault=None):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    trainable_specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in weights.trainable)
    logits, labels = received_pass(program, predict, dataset, hparams)
    ctx = ClientContext(hparams, state, received=initial_weights,
                        initial_trainable=tuple(initial_weights.trainable), predict=predict,
                        dataset=dataset, logits=logits, labels=labels, references=references)
    program.start(ctx)
    table = state[program.rows] if program.rows else tf.zeros([0])

    def step(loop_state, batch):
      opt_state, table, sums, steps = loop_state
      rows = tf.gather(table, batch[INDEX_KEY]) if program.rows else None
      ctx.step = steps
      batch = program.batch(batch, ctx)
      opt_state, new_trainable, _, per_example, logits = client_step.train_step(
          forward, model.trainable_variables, program, optimizer, opt_state, batch, ctx,
          weight_decay, rows=rows, regularization=client_step.model_losses(model))
      for variable, value in zip(model.trainable_variables, new_trainable):
        variable.assign(value)
      if program.rows:
        table = tf.tensor_scatter_nd_update(table, batch[INDEX_KEY][:, None], ctx.rows)
      sums = tuple(a + b for a, b in zip(sums, _batch_sums(batch, per_example, logits)))
      return opt_state, table, sums, steps + 1

    zero_sums = (tf.constant(0.0), tf.constant(0.0), tf.constant(0, tf.int64),
                 tf.constant(0.0))
    _, table, sums, steps = dataset.repeat(local_epochs).reduce(
        (optimizer.initialize(trainable_specs), table, zero_sums,
         tf.constant(0, tf.int64)), step)
    if program.rows:
      ctx.state[program.rows] = table
    ctx.trained, ctx.steps = weights, steps
    ctx.predict = predict
    program.finish(ctx)
    return _client_result(program, ctx, initial_weights, weights, state, sums,
                          local_epochs, fault)

  return train


def build_client_update(model_fn: Callable[[], tf.keras.Model], element_spec, optimizer,
                        program: ClientProgram, *, local_epochs: int = 1,
                        weight_decay: float = 0.0, faults: bool = False):
  """The TFF computation of one client's round.

  ``(weights, data, state, hparams) -> <ClientResult, metrics, state>``; ``data`` is a
  ``ClientData.pipeline_input()`` (the client's arrays, seed pair, shuffle buffer and batch
  size), from which the computation builds the client's dataset in its own graph
  (``client_data.batched_pipeline``: the batches ``ClientData.dataset()`` yields).
  ``metrics`` are sums over clients (``finalize_client_metrics`` turns them into means).
  With ``faults``, a fifth argument: the client's fault (``ops.faults_tf.FAULT_SPEC``).

  Args:
    model_fn: No-arg callable returning a new, uncompiled Keras model (logits out).
    element_spec: Element spec of a client dataset (batched mapping, see module doc).
    optimizer: A ``tff.learning.optimizers.Optimizer``; its state starts fresh each round.
    program: The method's ``ClientProgram`` (its client parts).
    local_epochs: Passes over the client's data per round.
    weight_decay: Coupled L2 strength (0 disables it).
    faults: Whether the computation takes each client's simulated fault.
  """
  types = (weights_type_of(model_fn),
           tff.types.tensorflow_to_type(client_data_lib.pipeline_input_spec(element_spec)),
           state_type_of(program), hparams_type_of(program))

  def train(initial_weights, data, *rest):
    dataset = client_data_lib.batched_pipeline(**data)
    return build_local_training(model_fn(), optimizer, program, local_epochs,
                                weight_decay, model_fn)(initial_weights, dataset, *rest)

  if faults:
    @tff.tensorflow.computation(*types, tff.types.tensorflow_to_type(faults_tf.FAULT_SPEC))
    def faulty_client_update(initial_weights, data, state, hparams, fault):
      return train(initial_weights, data, state, hparams, fault)

    return faulty_client_update

  @tff.tensorflow.computation(*types)
  def client_update(initial_weights, data, state, hparams):
    return train(initial_weights, data, state, hparams)

  return client_update


def client_outcome(update, weight, *, loss_sum, correct, num_examples: int, finite: bool,
                   objective_metrics=None) -> tuple:
  """One client's ``(ClientResult, metrics)`` from its trained update and sums, outside
  TFF's graph (the ``tflite`` runtime), by the rule ``build_local_training`` applies in
  its graph: a non-finite update is sent as zeros of weight 0 (``client_metrics``).
  ``objective_metrics``: ``{name: value}`` of the parts' metrics (``Needs.metrics``)."""
  if not finite:
    update = tf.nest.map_structure(np.zeros_like, update)
  return (tff.learning.templates.ClientResult(update=update,
                                              update_weight=np.float32(weight if finite else 0)),
          client_metrics(loss_sum=loss_sum, correct=correct, num_examples=num_examples,
                         finite=finite, objective_metrics=objective_metrics))


def client_metrics(*, loss_sum, correct, num_examples, finite,
                   objective_metrics=None) -> collections.OrderedDict:
  """The summable metrics ``build_local_training`` reports, outside TFF's graph, of one
  client (scalars) or of many (arrays ``[C]``, summed with ``.sum(axis=0)``), by its rule:
  a client whose update is not finite reports zeros and counts in ``non_finite_clients``.
  ``objective_metrics``: ``{name: value}`` of the parts' metrics (``Needs.metrics``)."""
  finite = np.asarray(finite, bool)
  num_examples = np.asarray(num_examples, np.int64)

  def keep(value, dtype):
    return np.where(finite, value, 0).astype(dtype)

  metrics = collections.OrderedDict(
      loss_sum=keep(loss_sum, np.float32), correct=keep(correct, np.float32),
      num_examples=keep(num_examples, np.int64),
      non_finite_clients=np.logical_not(finite).astype(np.int32),
      client_accuracy_sum=keep(np.asarray(correct, np.float32) / np.maximum(num_examples, 1),
                               np.float32),
      finite_clients=finite.astype(np.int32))
  if objective_metrics:
    metrics[OBJECTIVE_METRICS_KEY] = collections.OrderedDict(
        (name, keep(value, np.float32)) for name, value in objective_metrics.items())
  return metrics


class ClientResults(collections.abc.Sequence):
  """A round's ``ClientResult`` per client, in client order. ``stacked_blocks``: the same
  updates as row blocks stacked on a leading client axis (a list of structures of tensors,
  ``[clients_i, ...]``, whose rows are the clients in order) when the client runtime
  trained them stacked and kept them so, else ``None``. ``update_weights``: float32
  ``[clients]``, each client's ``update_weight``.

  Built from blocks (:meth:`of_blocks`), a client's ``ClientResult`` is made when it is
  read, its update a view of its row: a round that only aggregates the blocks builds no
  per-client object."""

  def __init__(self, results=(), stacked_blocks=None):
    self._results = list(results)
    self.stacked_blocks = stacked_blocks
    self.update_weights = update_weights_of(self._results)

  @classmethod
  def of_blocks(cls, stacked_blocks: list, update_weights) -> 'ClientResults':
    """The results of clients trained stacked: their updates the rows of ``stacked_blocks``
    (``ModelWeights`` of ``[clients_i, ...]`` arrays or tensors, in client order)."""
    self = cls(stacked_blocks=stacked_blocks)
    self.update_weights = np.asarray(update_weights, np.float32)
    self._results = None
    self._views = [tf.nest.map_structure(np.asarray, b) for b in stacked_blocks]
    self._starts = np.cumsum([0] + [len(tf.nest.flatten(v)[0]) for v in self._views])
    return self

  def __len__(self) -> int:
    return len(self.update_weights)

  def __getitem__(self, index):
    if isinstance(index, slice):
      return [self[i] for i in range(*index.indices(len(self)))]
    if self._results is not None:
      return self._results[index]
    client = range(len(self))[index]  # Negative indices, and the IndexError.
    block = int(np.searchsorted(self._starts, client, side='right')) - 1
    row, views = client - self._starts[block], self._views[block]
    return tff.learning.templates.ClientResult(
        update=model_weights_of_values([t[row] for t in views.trainable],
                                       [t[row] for t in views.non_trainable]),
        update_weight=self.update_weights[client])


def update_weights_of(results) -> np.ndarray:
  """float32 ``[clients]``: each client's ``update_weight`` (``ClientResults`` keep them
  as one array; any other sequence of ``ClientResult`` is read one by one)."""
  kept = getattr(results, 'update_weights', None)
  if kept is not None:
    return kept
  return np.array([result.update_weight for result in results], np.float32)


def stacked_update_blocks(results) -> list:
  """The clients' updates as row blocks on a leading client axis, in client order: the
  runtime's own blocks when it kept them (``ClientResults.stacked_blocks``, no copy), else
  one block stacked here."""
  kept = getattr(results, 'stacked_blocks', None)
  if kept is not None:
    return kept
  updates = [result.update for result in results]
  columns = zip(*(tf.nest.flatten(update) for update in updates))
  return [tf.nest.pack_sequence_as(updates[0], [np.stack(column) for column in columns])]


def stacked_updates(results):
  """The clients' updates stacked on a leading client axis, in one structure."""
  return aggregator_common.joined_blocks(stacked_update_blocks(results))


def finalize_client_metrics(sums) -> collections.OrderedDict:
  """Summed client metrics -> the round's training metrics (TensorFlow, any runtime).

  ``loss`` and ``accuracy`` are example-weighted means; ``client_mean_accuracy`` and
  each of the parts' metrics (``objective``) are unweighted means over the clients
  whose update was finite (each client counts once); the parts' ``outputs`` stay
  sums.
  """
  examples = tf.maximum(tf.cast(sums['num_examples'], tf.float32), 1.0)
  clients = tf.maximum(tf.cast(sums['finite_clients'], tf.float32), 1.0)
  metrics = collections.OrderedDict(
      loss=sums['loss_sum'] / examples,
      accuracy=sums['correct'] / examples,
      client_mean_accuracy=sums['client_accuracy_sum'] / clients,
      num_examples=sums['num_examples'],
      non_finite_clients=sums['non_finite_clients'],
  )
  if OBJECTIVE_METRICS_KEY in sums:
    metrics[OBJECTIVE_METRICS_KEY] = collections.OrderedDict(
        (name, value / clients) for name, value in sums[OBJECTIVE_METRICS_KEY].items())
  if OUTPUTS_KEY in sums:
    metrics[OUTPUTS_KEY] = sums[OUTPUTS_KEY]
  return metrics


def summed_client_metrics(per_client: list) -> collections.OrderedDict:
  """The clients' metrics (NumPy values shaped as ``build_local_training`` returns them)
  summed in their own dtypes, as TFF's ``federated_sum`` of them (at least one client)."""
  if not per_client:
    raise ValueError('no client metrics to sum')

  def total(*values):
    values = np.asarray(values)
    return values.sum(axis=0, dtype=values.dtype)

  return tf.nest.map_structure(total, *per_client)


def build_finalize_client_metrics(sums_type):
  """TFF computation of ``finalize_client_metrics``."""

  @tff.tensorflow.computation(sums_type)
  def finalize(sums):
    return finalize_client_metrics(sums)

  return finalize
