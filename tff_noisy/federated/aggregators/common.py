"""Pieces the aggregator factories share: type checks, client exclusion, server gathering.

A client takes part when its weight is > 0 and its update is finite (the client work
gives a non-finite update weight 0). :func:`build_exclusion` zeroes the others at the
client, so no NaN reaches a sum. The rules that need every update at once (coordinate
median, trimmed mean, Krum) stack them at the server (:func:`build_gathered_process`): a
``tff.federated_aggregate`` whose accumulator holds each leaf with an unknown leading
dimension and grows by concatenation, in client order (as TFF's ``aggregators/sampling.py``
types its reservoir); the rule is the aggregation's report step.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def check_types(value_type, weight_type):
  """Raises TypeError unless the value is a structure of float tensors, the weight a scalar."""
  if (not isinstance(value_type, (tff.TensorType, tff.StructType))
      or not tff.types.is_structure_of_floats(value_type)):
    raise TypeError(f'expected a structure of float tensors, got {value_type}')
  if not (isinstance(weight_type, tff.TensorType) and weight_type.shape == ()
          and np.issubdtype(weight_type.dtype, np.number)):
    raise TypeError(f'expected a scalar numeric weight, got {weight_type}')


def build_exclusion(value_type, weight_type, weighted: bool = True):
  """A client computation (value, weight) -> {value, weight}.

  A client that takes part keeps its value and its weight (1 if not ``weighted``); the
  others send zeros with weight 0.
  """

  @tff.tensorflow.computation(value_type, weight_type)
  def exclude(value, weight):
    weight = tf.cast(weight, tf.float32)
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(t))
                            for t in tf.nest.flatten(value)] + [tf.math.is_finite(weight)])
    included = tf.logical_and(finite, weight > 0)
    return collections.OrderedDict(
        value=tf.nest.map_structure(
            lambda t: tf.where(included, t, tf.zeros_like(t)), value),
        weight=tf.where(included, weight if weighted else 1.0, 0.0))

  return exclude


COUNTS_TYPE = tff.types.to_type(
    collections.OrderedDict(excluded_clients=np.int32, included_clients=np.int32))


@tff.tensorflow.computation(np.int32, np.int32)
def _counts(excluded, total):
  return collections.OrderedDict(excluded_clients=excluded, included_clients=total - excluded)


def client_counts(weight):
  """{excluded_clients, included_clients} at the server: clients whose weight is not > 0."""

  @tff.tensorflow.computation(weight.type_signature.member)
  def is_excluded(w):
    return tf.cast(tf.logical_not(w > 0), tf.int32)

  excluded = tff.federated_sum(tff.federated_map(is_excluded, weight))
  total = tff.federated_sum(tff.federated_value(1, tff.CLIENTS))
  return tff.federated_map(_counts, (excluded, total))


def _stacked(value_type):
  """``value_type`` with an unknown leading (client) dimension on every tensor."""
  return tff.types.type_transformations.transform_type_postorder(
      value_type, lambda t: (tff.TensorType(t.dtype, (None,) + t.shape), True)
      if isinstance(t, tff.TensorType) else (t, False))[0]


def build_gathered_process(value_type, weight_type, rule):
  """A stateless ``AggregationProcess`` applying ``rule`` to the updates stacked at the server.

  ``rule(values, included)`` gets the [J, ...] leaves in client order (excluded clients
  zeroed) and the bool[J] mask, and returns (result shaped like one update,
  {measurement: tensor}); it runs in a ``tf.function`` as the aggregation's report step.
  The measurements start with ``excluded_clients`` and ``included_clients``.
  """
  check_types(value_type, weight_type)
  exclude = build_exclusion(value_type, weight_type)
  stacked_type = tff.types.to_type(collections.OrderedDict(
      values=_stacked(value_type), included=tff.TensorType(np.bool_, [None])))

  @tff.tensorflow.computation
  def zero():
    return collections.OrderedDict(
        values=tff.types.structure_from_tensor_type_tree(
            lambda t: tf.zeros((0,) + t.shape, t.dtype), value_type),
        included=tf.zeros([0], tf.bool))

  @tff.tensorflow.computation(stacked_type, exclude.type_signature.result)
  def accumulate(stacked, client):
    return collections.OrderedDict(
        values=tf.nest.map_structure(lambda s, t: tf.concat([s, t[tf.newaxis]], 0),
                                     stacked['values'], client['value']),
        included=tf.concat([stacked['included'], [client['weight'] > 0]], 0))

  @tff.tensorflow.computation(stacked_type, stacked_type)
  def merge(a, b):
    return tf.nest.map_structure(lambda x, y: tf.concat([x, y], 0), a, b)

  @tff.tensorflow.computation(stacked_type)
  @tf.function
  def report(stacked):
    included = tf.cast(stacked['included'], tf.int32)
    counts = collections.OrderedDict(
        excluded_clients=tf.size(included) - tf.reduce_sum(included),
        included_clients=tf.reduce_sum(included))
    result, measurements = rule(stacked['values'], stacked['included'])
    return result, collections.OrderedDict(counts, **measurements)

  @tff.federated_computation
  def init_fn():
    return tff.federated_value((), tff.SERVER)

  @tff.federated_computation(init_fn.type_signature.result,
                             tff.FederatedType(value_type, tff.CLIENTS),
                             tff.FederatedType(weight_type, tff.CLIENTS))
  def next_fn(state, value, weight):
    cleaned = tff.federated_map(exclude, (value, weight))
    result, measurements = tff.federated_aggregate(cleaned, zero(), accumulate, merge, report)
    return tff.templates.MeasuredProcessOutput(state, result, measurements)

  return tff.templates.AggregationProcess(init_fn, next_fn)


def finite_rows(values):
  """bool[J]: whether every value of each client's row of updates stacked on axis 0 is
  finite."""
  return tf.reduce_all(tf.stack(
      [tf.reduce_all(tf.math.is_finite(tf.reshape(t, [tf.shape(t)[0], -1])), axis=1)
       for t in tf.nest.flatten(values)]), axis=0)


def _included(values, weights):
  """bool[J]: the clients that take part (finite update and weight > 0, as ``exclude``)."""
  weights = tf.cast(weights, tf.float32)
  finite = tf.logical_and(finite_rows(values), tf.math.is_finite(weights))
  return tf.logical_and(finite, weights > 0)


def joined_blocks(blocks: list):
  """Row blocks of stacked updates (structures of ``[J_i, ...]`` tensors) as one stack."""
  if len(blocks) == 1:
    return blocks[0]
  return tf.nest.map_structure(lambda *parts: tf.concat(parts, 0), *blocks)


def counts_of(included):
  """``{excluded_clients, included_clients}`` of a bool[J] mask."""
  included = tf.cast(included, tf.int32)
  return collections.OrderedDict(excluded_clients=tf.size(included) - tf.reduce_sum(included),
                                 included_clients=tf.reduce_sum(included))


def gathered_in_process(rule):
  """``build_gathered_process(..., rule)``'s aggregation of updates stacked in this process,
  given as row blocks in client order (``client_work.stacked_update_blocks``)."""

  def aggregate(blocks, weights):
    return aggregate_stacked(joined_blocks(blocks), weights)

  @tf.function(reduce_retracing=True)  # Rounds differ in their number of clients.
  def aggregate_stacked(values, weights):
    included = _included(values, weights)
    values = tf.nest.map_structure(
        lambda t: tf.where(tf.reshape(included, [-1] + [1] * (t.shape.rank - 1)), t,
                           tf.zeros_like(t)), values)
    result, measurements = rule(values, included)
    return result, collections.OrderedDict(counts_of(included), **measurements)

  return aggregate
