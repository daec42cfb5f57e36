"""Probing without training the global model: a per-client statistic on any set of clients.

``build_probe(model_fn, element_spec, statistic)`` is the one computation that evaluates
``statistic(model, dataset)`` on each given client with the just-broadcast global
weights loaded into ``model`` (FedLN's energy scores, MaskedOptim's per-class mean loss,
FedEFC's accuracy on the client's own labels). Which clients it runs on is the caller's
choice, independent of the round's sample; it leaves the process state untouched.
With ``in_process`` (the ``tf`` and ``tflite`` client runtimes) the same statistic runs
in this process's TensorFlow, one client after another, instead of TFF's worker.
"""

from typing import Callable

import tensorflow as tf

from tff_noisy.federated import client_work
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

Statistic = Callable[[tf.keras.Model, tf.data.Dataset], object]


def build_client_statistic(model_fn, element_spec, statistic: Statistic):
  """TFF computation ``(weights, dataset) -> statistic`` run on one client."""
  weights_type = client_work.weights_type_of(model_fn)
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(element_spec))

  @tff.tensorflow.computation(weights_type, data_type)
  def client_statistic(weights, dataset):
    return _with_weights(model_fn(), statistic)(weights, dataset)

  return client_statistic


def _with_weights(model: tf.keras.Model, statistic: Statistic):
  """``tf.function (weights, dataset) -> statistic(model, dataset)`` with ``weights``
  assigned to ``model`` first (the function orders the assignment before the statistic's
  forward passes)."""
  variables = client_work.model_weights_of(model)

  @tf.function
  def evaluate(weights, dataset):
    tf.nest.map_structure(lambda v, t: v.assign(t), variables, weights)
    return statistic(model, dataset)

  return evaluate


def build_probe(model_fn, element_spec, statistic: Statistic, in_process: bool = False):
  """``(global weights@SERVER, data@CLIENTS) -> statistic@CLIENTS``; called with the
  weights and a list of client datasets, it returns each client's statistic in order."""
  if in_process:
    return _in_process_probe(model_fn, statistic)
  client_statistic = build_client_statistic(model_fn, element_spec, statistic)
  weights_type, data_type = client_statistic.type_signature.parameter

  @tff.federated_computation(tff.FederatedType(weights_type, tff.SERVER),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def probe(weights, client_data):
    return tff.federated_map(client_statistic,
                             (tff.federated_broadcast(weights), client_data))

  client_work.restore_eager_model_classes(model_fn)
  return probe


def _in_process_probe(model_fn, statistic: Statistic):
  """``build_probe``'s computation in this process: one model, one traced function."""
  evaluate = _with_weights(model_fn(), statistic)

  def probe(weights, client_data: list) -> list:
    weights = tf.nest.map_structure(tf.convert_to_tensor, weights)
    return [tf.nest.map_structure(lambda t: t.numpy(), evaluate(weights, dataset))
            for dataset in client_data]

  return probe


def logits_of(model: tf.keras.Model, dataset: tf.data.Dataset) -> tf.Tensor:
  """The model's inference-mode logits on every example of ``dataset``, in order [N, C]."""
  collected = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
  for batch in dataset:
    collected = collected.write(collected.size(), model(batch['x'], training=False))
  return collected.concat()
