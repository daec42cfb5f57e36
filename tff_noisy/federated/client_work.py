"""The one client work every method trains with: local SGD on a pluggable per-example loss.

Client datasets are batched mappings with keys ``x`` and ``y`` and, optionally,
``aggregation_weight`` (one float per example) plus any inputs a method's loss reads.
The client's ``update_weight`` is the sum of ``aggregation_weight`` over one pass of its
data, or its number of examples when the key is absent; a method that weights clients
(NA-FedAvg: ``1 - n_hat``) sets the per-example value and needs no client work of its own.

The update is the difference between the received and the trained weights for the
trainable *and* the non-trainable variables, so BatchNorm statistics are averaged with
the same weights as everything else (TFF's FedAvg leaves them at their initial value).
A client whose update has a non-finite value sends zeros with weight 0 and is counted
in ``non_finite_clients``; the finalizer also refuses a non-finite aggregate.
"""

import collections
from typing import Callable, Optional

import tensorflow as tf

from tff_noisy.ops import losses
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

LossFn = Callable[[tf.Tensor, tf.Tensor, dict], tf.Tensor]
AGGREGATION_WEIGHT_KEY = 'aggregation_weight'


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


def weights_type_of(model_fn: Callable[[], tf.keras.Model]):
  with tf.Graph().as_default():
    weights = model_weights_of(model_fn())
    return tff.types.tensorflow_to_type(
        tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), weights))


def _zero_if_any_non_finite(structure):
  flat = tf.nest.flatten(structure)
  all_finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(t)) for t in flat])
  zeros = tf.nest.map_structure(tf.zeros_like, structure)
  cleaned = tf.cond(all_finite, lambda: structure, lambda: zeros)
  return cleaned, tf.logical_not(all_finite)


def build_local_training(model, optimizer, loss_fn: Optional[LossFn], proximal_strength: float,
                         local_epochs: int):
  """Returns a tf.function running ``local_epochs`` of training from given weights.

  ``loss_fn`` is a per-example loss ``(labels, logits, batch) -> [B]``; cross-entropy if None.
  """
  loss_fn = loss_fn or losses.cross_entropy
  weights = model_weights_of(model)

  @tf.function
  def train(initial_weights, dataset):
    tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
    trainable_specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in weights.trainable)
    initial_trainable = tuple(initial_weights.trainable)

    def step(state, batch):
      opt_state, loss_sum, correct, num_examples, weight_sum = state
      with tf.GradientTape() as tape:
        logits = model(batch['x'], training=True)
        per_example = loss_fn(batch['y'], logits, batch)
        loss = tf.reduce_mean(per_example)
      grads = tape.gradient(loss, weights.trainable)
      if proximal_strength:
        grads = [g + p for g, p in zip(grads, losses.proximal_gradients(
            weights.trainable, initial_trainable, proximal_strength))]
      opt_state, new_trainable = optimizer.next(
          opt_state, tuple(weights.trainable), tuple(grads))
      for variable, value in zip(weights.trainable, new_trainable):
        variable.assign(value)
      batch_size = tf.shape(batch['y'])[0]
      if AGGREGATION_WEIGHT_KEY in batch:
        batch_weight = tf.reduce_sum(tf.cast(batch[AGGREGATION_WEIGHT_KEY], tf.float32))
      else:
        batch_weight = tf.cast(batch_size, tf.float32)
      predicted = tf.argmax(logits, axis=-1, output_type=tf.int64)
      correct += tf.reduce_sum(tf.cast(
          tf.equal(predicted, tf.cast(batch['y'], tf.int64)), tf.float32))
      return (opt_state, loss_sum + tf.reduce_sum(per_example), correct,
              num_examples + tf.cast(batch_size, tf.int64), weight_sum + batch_weight)

    initial_state = (optimizer.initialize(trainable_specs), tf.constant(0.0),
                     tf.constant(0.0), tf.constant(0, tf.int64), tf.constant(0.0))
    _, loss_sum, correct, num_examples, weight_sum = dataset.repeat(local_epochs).reduce(
        initial_state, step)
    update = tf.nest.map_structure(tf.subtract, initial_weights, weights)
    update, non_finite = _zero_if_any_non_finite(update)
    update_weight = tf.where(non_finite, 0.0, weight_sum / float(local_epochs))
    metrics = collections.OrderedDict(
        loss_sum=tf.where(non_finite, 0.0, loss_sum),
        correct=tf.where(non_finite, 0.0, correct),
        num_examples=tf.where(non_finite, tf.constant(0, tf.int64), num_examples),
        non_finite_clients=tf.cast(non_finite, tf.int32),
    )
    return tff.learning.templates.ClientResult(
        update=update, update_weight=update_weight), metrics

  return train


def build_client_work(
    model_fn: Callable[[], tf.keras.Model],
    element_spec,
    optimizer,
    *,
    loss_fn: Optional[LossFn] = None,
    proximal_strength: float = 0.0,
    local_epochs: int = 1,
):
  """Builds the ``ClientWorkProcess`` shared by all methods.

  Args:
    model_fn: No-arg callable returning a new, uncompiled Keras model (logits out).
    element_spec: Element spec of a client dataset (batched mapping, see module doc).
    optimizer: A ``tff.learning.optimizers.Optimizer``; its state starts fresh each round.
    loss_fn: Per-example loss ``(labels, logits, batch) -> [B]``; cross-entropy if None.
    proximal_strength: FedProx mu (0 disables the proximal term).
    local_epochs: Passes over the client's data per round.
  """
  weights_type = weights_type_of(model_fn)
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(element_spec))

  @tff.tensorflow.computation(weights_type, data_type)
  def client_update(initial_weights, dataset):
    train = build_local_training(model_fn(), optimizer, loss_fn, proximal_strength,
                                  local_epochs)
    return train(initial_weights, dataset)

  @tff.federated_computation
  def init_fn():
    return tff.federated_value((), tff.SERVER)

  @tff.tensorflow.computation(client_update.type_signature.result[1])
  def finalize_metrics(sums):
    examples = tf.maximum(tf.cast(sums['num_examples'], tf.float32), 1.0)
    return collections.OrderedDict(
        loss=sums['loss_sum'] / examples,
        accuracy=sums['correct'] / examples,
        num_examples=sums['num_examples'],
        non_finite_clients=sums['non_finite_clients'],
    )

  @tff.federated_computation(
      init_fn.type_signature.result,
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(data_type, tff.CLIENTS),
  )
  def next_fn(state, weights, client_data):
    results, metrics = tff.federated_map(client_update, (weights, client_data))
    train = tff.federated_map(finalize_metrics, tff.federated_sum(metrics))
    measurements = tff.federated_zip(collections.OrderedDict(train=train))
    return tff.templates.MeasuredProcessOutput(state, results, measurements)

  return tff.learning.templates.ClientWorkProcess(init_fn, next_fn)
