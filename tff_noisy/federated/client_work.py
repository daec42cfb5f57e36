"""The one client work every method trains with: local training on a ``ClientObjective``.

Client datasets are batched mappings with keys ``x``, ``y`` and ``index`` (the example's
position in the client's data) and, optionally, ``aggregation_weight`` (one float per
example) plus any per-example fields a method's objective reads. The client's
``update_weight`` is the sum of ``aggregation_weight`` over one pass of its data, or its
number of examples when the key is absent; a method that weights clients (NA-FedAvg:
``1 - n_hat``) sets the per-example value and needs no client work of its own.

A client receives the global weights, its dataset, its own state (declared by the
objective's ``state_spec``; ``()`` for a stateless objective) and the round's hparams,
and returns its ``ClientResult``, summable metrics and its new state. The update is the
difference between the received and the trained weights for the trainable *and* the
non-trainable variables, so BatchNorm statistics are averaged with the same weights as
everything else. A client whose update has a non-finite value sends zeros with weight 0,
keeps its old state and is counted in ``non_finite_clients``; the finalizer also refuses
a non-finite aggregate. With simulated faults (``faults:``), each client also receives
its fault (``ops.faults_tf.FAULT_SPEC``) and a Byzantine client's update is corrupted
(``ops.faults_tf.corrupt``) after training and before that check, so a ``nan`` client is
one more non-finite client. What an objective sends beside its update
(``client_outputs``: SCAFFOLD's Δc_i) is summed over the clients whose update was finite
into the round's training metrics under ``outputs``.
"""

import collections
import functools
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

import models
from tff_noisy.federated import client_step
from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import faults_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

AGGREGATION_WEIGHT_KEY = 'aggregation_weight'
INDEX_KEY = 'index'
OBJECTIVE_METRICS_KEY = 'objective'  # The objective's own per-client metrics.
OUTPUTS_KEY = 'outputs'  # What the objective sends the server beside the update, summed.


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


def state_type_of(objective: ClientObjective):
  """The TFF type of a client's state under ``objective`` (``<>`` when it keeps none)."""
  return tff.types.tensorflow_to_type(collections.OrderedDict(objective.state_spec))


def hparams_type_of(objective: ClientObjective):
  """The TFF type of the server-decided values broadcast to clients each round."""
  return tff.types.tensorflow_to_type(collections.OrderedDict(
      (name, tf.TensorSpec(value.shape, value.dtype))
      for name, value in objective.hparams.items()))


def build_local_training(model: tf.keras.Model, optimizer, objective: ClientObjective,
                         local_epochs: int, weight_decay: float = 0.0,
                         model_fn: Optional[Callable[[], tf.keras.Model]] = None):
  """Returns a tf.function ``(weights, dataset, state, hparams[, fault]) -> (result,
  metrics, state)``.

  Runs ``local_epochs`` passes of ``client_step.train_step`` on each batch as the
  objective's ``mix_batch`` gives it (``optimizer`` on the objective's mean per-example
  loss plus the model's regularisation losses, FedProx's proximal term and the coupled L2
  ``weight_decay``), starting from the received weights, between the objective's
  prologue and epilogue. A ``fault``
  (``ops.faults_tf.FAULT_SPEC``) corrupts the update the client sends. ``model_fn``
  builds the frozen copies of an objective's ``reference_models``.
  """
  weights = model_weights_of(model)
  feature_model = models.features_and_logits(model) if objective.uses_features else None
  rows_name = objective.trainable_state
  if objective.reference_models and model_fn is None:
    raise ValueError(f'{type(objective).__name__} keeps frozen copies of the model '
                     f'{objective.reference_models}: build_local_training needs model_fn')
  copies = {name: model_fn() for name in objective.reference_models}
  frozen = {name: models.features_and_logits(copy) for name, copy in copies.items()}

  def predict(x):
    return model(x, training=False)

  def forward(x):
    if feature_model is None:
      return None, model(x, training=True)
    features, logits = feature_model(x, training=True)
    return features, logits

  # In process, clients' per-example state differs in rows: one trace for every size.
  @tf.function(reduce_retracing=True)
  def train(initial_weights, dataset, state, hparams, fault=None):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    trainable_specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in weights.trainable)
    initial_trainable = tuple(initial_weights.trainable)
    if copies:
      for name, values in objective.reference_weights(initial_weights, state,
                                                      hparams).items():
        tf.nest.map_structure(lambda v, t: v.assign(t), model_weights_of(copies[name]),
                              values)
    context = objective.prologue(predict, dataset, state, hparams)
    if frozen:
      context = dict(context, **{name: functools.partial(copy, training=False)
                                 for name, copy in frozen.items()})
    table = state[rows_name] if rows_name else tf.zeros([0])

    def step(loop_state, batch):
      opt_state, table, loss_sum, correct, num_examples, weight_sum, steps = loop_state
      rows = tf.gather(table, batch[INDEX_KEY]) if rows_name else None
      batch = objective.mix_batch(batch, steps, hparams)
      opt_state, _, per_example, logits, row_grads = client_step.train_step(
          model, forward, objective, optimizer, opt_state, batch, context, hparams,
          initial_trainable, weight_decay, rows)
      if rows_name:
        table = tf.tensor_scatter_nd_update(
            table, batch[INDEX_KEY][:, None],
            objective.update_rows(rows, row_grads, hparams))
      batch_size = tf.shape(batch['y'])[0]
      if AGGREGATION_WEIGHT_KEY in batch:
        batch_weight = tf.reduce_sum(tf.cast(batch[AGGREGATION_WEIGHT_KEY], tf.float32))
      else:
        batch_weight = tf.cast(batch_size, tf.float32)
      predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
      correct += tf.reduce_sum(tf.cast(
          tf.equal(predicted, tf.cast(batch['y'], tf.int64)), tf.float32))
      return (opt_state, table, loss_sum + tf.reduce_sum(per_example), correct,
              num_examples + tf.cast(batch_size, tf.int64), weight_sum + batch_weight,
              steps + 1)

    initial_loop_state = (optimizer.initialize(trainable_specs), table, tf.constant(0.0),
                          tf.constant(0.0), tf.constant(0, tf.int64), tf.constant(0.0),
                          tf.constant(0, tf.int64))
    _, table, loss_sum, correct, num_examples, weight_sum, steps = dataset.repeat(
        local_epochs).reduce(initial_loop_state, step)
    trained_state = objective.trained_state(
        dict(state, **{rows_name: table}) if rows_name else state, context, initial_weights,
        weights, steps, hparams)
    new_state, scale = objective.epilogue(predict, dataset, context, trained_state, hparams)
    update = tf.nest.map_structure(lambda w, t: (w - t) * scale, initial_weights, weights)
    if fault is not None:
      update = faults_tf.corrupt(update, fault)
    update, non_finite = client_step.zero_if_any_non_finite(update)
    new_state = tf.nest.map_structure(
        lambda new, old: tf.where(non_finite, old, new), new_state, state, check_types=False)
    update_weight = tf.where(non_finite, 0.0, weight_sum / float(local_epochs))
    finite = tf.logical_not(non_finite)
    accuracy = correct / tf.maximum(tf.cast(num_examples, tf.float32), 1.0)
    metrics = collections.OrderedDict(
        loss_sum=tf.where(non_finite, 0.0, loss_sum),
        correct=tf.where(non_finite, 0.0, correct),
        num_examples=tf.where(non_finite, tf.constant(0, tf.int64), num_examples),
        non_finite_clients=tf.cast(non_finite, tf.int32),
        client_accuracy_sum=tf.where(non_finite, 0.0, accuracy),
        finite_clients=tf.cast(finite, tf.int32),
    )
    if objective.metric_names:
      reported = objective.client_metrics(context, hparams)
      metrics[OBJECTIVE_METRICS_KEY] = collections.OrderedDict(
          (name, tf.where(non_finite, 0.0, tf.cast(reported[name], tf.float32)))
          for name in objective.metric_names)
    outputs = objective.client_outputs(state, new_state, hparams)
    if outputs:
      metrics[OUTPUTS_KEY] = collections.OrderedDict(
          (name, tf.where(non_finite, tf.zeros_like(value), value))
          for name, value in sorted(outputs.items()))
    return tff.learning.templates.ClientResult(
        update=update, update_weight=update_weight), metrics, new_state

  return train


def build_client_update(model_fn: Callable[[], tf.keras.Model], element_spec, optimizer,
                        objective: ClientObjective, *, local_epochs: int = 1,
                        weight_decay: float = 0.0, faults: bool = False):
  """The TFF computation of one client's round.

  ``(weights, dataset, state, hparams) -> <ClientResult, metrics, state>``; ``metrics``
  are sums over clients (``finalize_client_metrics`` turns them into means). With
  ``faults``, a fifth argument: the client's fault (``ops.faults_tf.FAULT_SPEC``).

  Args:
    model_fn: No-arg callable returning a new, uncompiled Keras model (logits out).
    element_spec: Element spec of a client dataset (batched mapping, see module doc).
    optimizer: A ``tff.learning.optimizers.Optimizer``; its state starts fresh each round.
    objective: The method's ``ClientObjective``.
    local_epochs: Passes over the client's data per round.
    weight_decay: Coupled L2 strength (0 disables it).
    faults: Whether the computation takes each client's simulated fault.
  """
  types = (weights_type_of(model_fn),
           tff.SequenceType(tff.types.tensorflow_to_type(element_spec)),
           state_type_of(objective), hparams_type_of(objective))

  def train(*args):
    return build_local_training(model_fn(), optimizer, objective, local_epochs,
                                weight_decay, model_fn)(*args)

  if faults:
    @tff.tensorflow.computation(*types, tff.types.tensorflow_to_type(faults_tf.FAULT_SPEC))
    def faulty_client_update(initial_weights, dataset, state, hparams, fault):
      return train(initial_weights, dataset, state, hparams, fault)

    return faulty_client_update

  @tff.tensorflow.computation(*types)
  def client_update(initial_weights, dataset, state, hparams):
    return train(initial_weights, dataset, state, hparams)

  return client_update


def client_outcome(update, weight, *, loss_sum, correct, num_examples: int, finite: bool,
                   objective_metrics=None) -> tuple:
  """One client's ``(ClientResult, metrics)`` from its trained update and sums, outside
  TFF's graph (the ``tflite`` runtime), by the rule ``build_local_training`` applies in
  its graph: a non-finite update is sent as zeros of weight 0 (``client_metrics``).
  ``objective_metrics``: ``{name: value}`` of the objective's ``metric_names``."""
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
  ``objective_metrics``: ``{name: value}`` of the objective's ``metric_names``."""
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


class ClientResults(tuple):
  """A round's ``ClientResult`` per client, in client order. ``stacked_update``: the same
  updates stacked on a leading client axis (a structure of tensors, ``[clients, ...]``)
  when the client runtime trained them stacked and kept them so, else ``None``."""

  def __new__(cls, results=(), stacked_update=None):
    self = super().__new__(cls, results)
    self.stacked_update = stacked_update
    return self


def stacked_updates(results):
  """The clients' updates stacked on a leading client axis: the runtime's own stack when
  it kept one (``ClientResults.stacked_update``, no copy), else stacked here."""
  kept = getattr(results, 'stacked_update', None)
  if kept is not None:
    return kept
  updates = [result.update for result in results]
  columns = zip(*(tf.nest.flatten(update) for update in updates))
  return tf.nest.pack_sequence_as(updates[0], [np.stack(column) for column in columns])


def finalize_client_metrics(sums) -> collections.OrderedDict:
  """Summed client metrics -> the round's training metrics (TensorFlow, any runtime).

  ``loss`` and ``accuracy`` are example-weighted means; ``client_mean_accuracy`` and
  each of the objective's metrics (``objective``) are unweighted means over the clients
  whose update was finite (each client counts once); the objective's ``outputs`` stay
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
