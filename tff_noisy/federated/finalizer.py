"""Server finalizer: a server-optimizer step on trainable weights, averaged statistics
for non-trainable ones, and no change at all when the aggregated update is non-finite."""

import collections

import tensorflow as tf

from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def build_apply_update(server_optimizer):
  """``tf.function (optimizer state, weights, update) -> (state, weights, measurements)``.

  Trainable weights take ``server_optimizer.next`` with the aggregated update as the
  gradient (SGD with learning rate 1 is FedAvg). Non-trainable weights (BatchNorm
  statistics) become ``weights - update``: the weighted mean of the clients' values. A
  non-finite update changes nothing (``update_non_finite``: 1). The finalizer's server
  step, also callable in this process (the in-process client runtimes).
  """

  @tf.function
  def apply_update(optimizer_state, weights, update):
    flat = tf.nest.flatten(update)
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(t)) for t in flat])
    measurements = collections.OrderedDict(update_non_finite=tf.cast(
        tf.logical_not(finite), tf.int32))
    if not finite:
      return optimizer_state, weights, measurements
    new_state, trainable = server_optimizer.next(
        optimizer_state, tuple(weights.trainable), tuple(update.trainable))
    non_trainable = [w - u for w, u in zip(weights.non_trainable, update.non_trainable)]
    new_weights = tff.learning.models.ModelWeights(
        trainable=list(trainable), non_trainable=non_trainable)
    return new_state, new_weights, measurements

  return apply_update


def build_model_finalizer(weights_type, server_optimizer):
  """Builds a ``FinalizerProcess`` of ``build_apply_update`` for updates shaped like the
  model's ``ModelWeights``."""

  @tff.tensorflow.computation
  def init_tf():
    specs = tuple(tf.TensorSpec(t.shape, t.dtype) for t in weights_type.trainable)
    return server_optimizer.initialize(specs)

  optimizer_state_type = init_tf.type_signature.result
  apply_update = tff.tensorflow.computation(
      optimizer_state_type, weights_type, weights_type)(build_apply_update(server_optimizer))

  @tff.federated_computation
  def init_fn():
    return tff.federated_eval(init_tf, tff.SERVER)

  @tff.federated_computation(
      init_fn.type_signature.result,
      tff.FederatedType(weights_type, tff.SERVER),
      tff.FederatedType(weights_type, tff.SERVER),
  )
  def next_fn(state, weights, update):
    new_state, new_weights, measurements = tff.federated_map(
        apply_update, (state, weights, update))
    return tff.templates.MeasuredProcessOutput(new_state, new_weights, measurements)

  return tff.learning.templates.FinalizerProcess(init_fn, next_fn)
