"""Weiszfeld's algorithm as a federated computation, in RFA's secure-average form.

Shared by the ``geometric_median`` and ``geometric_median_per_tensor`` factories; the
NumPy twin is ``tff_noisy.ops.geometric_median``. No update leaves its client: RFA
(Pillutla et al. 2022) computes each Weiszfeld step with one weighted average. The server
broadcasts the estimate z; client j sends beta_j x_j and beta_j, with
beta_j = w_j / max(floor, ||x_j - z||), and w_j ||x_j - z|| for the objective; the
server divides the two sums. The ``max_iter`` steps are unrolled; a converged estimate
stays fixed for the remaining ones. The distance is taken over the whole update (one
group) or over each tensor on its own (``per_tensor``: one group per tensor, each with its
own estimate, convergence and counters).

A step passes flat vectors (layouts in the code), so its graphs and types stay small
whatever the number of tensors: TFF compiles every unrolled copy.
"""

import collections
from typing import NamedTuple

import tensorflow as tf

from tff_noisy.federated.aggregators import common
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def build_weiszfeld_process(value_type, weight_type, *, per_tensor: bool, weighted: bool,
                            max_iter: int, floor: float, tolerance: float, relative: bool):
  """Builds the (stateless) ``AggregationProcess`` of a federated Weiszfeld.

  Args:
    value_type: Structure of float tensors (a ``ModelWeights`` of the model's shapes).
    weight_type: Scalar client weight; clients of weight 0 take no part.
    per_tensor: Weiszfeld on each tensor separately instead of on the whole update.
    weighted: Use the client weights; else every included client has weight 1.
    max_iter: Weiszfeld steps at most.
    floor: Floor of the distances (RFA's nu; MaskedOptim's eps).
    tolerance: A group stops, keeping z, once its step is shorter than this (times its
      objective if ``relative``) or is 0.
    relative: Scale ``tolerance`` by the objective f(z) = sum_j w_j ||x_j - z|| / sum_j w_j.

  Measurements: ``excluded_clients``, ``included_clients``, ``iterations`` (steps taken)
  and ``objective`` (f at the result); the last two are [num_tensors] if ``per_tensor``.
  """
  common.check_types(value_type, weight_type)
  exclude = common.build_exclusion(value_type, weight_type, weighted=weighted)
  steps = _steps(_Layout.of(value_type, per_tensor), exclude, floor=floor,
                 tolerance=tolerance, relative=relative)

  @tff.federated_computation
  def init_fn():
    return tff.federated_value((), tff.SERVER)

  @tff.federated_computation(init_fn.type_signature.result,
                             tff.FederatedType(value_type, tff.CLIENTS),
                             tff.FederatedType(weight_type, tff.CLIENTS))
  def next_fn(state, value, weight):
    cleaned = tff.federated_map(exclude, (value, weight))
    clients = tff.federated_map(steps.flatten, cleaned)
    estimate = tff.federated_map(steps.start, tff.federated_sum(tff.federated_map(
        steps.weigh, clients)))
    for step in range(max_iter + 1):
      sums = tff.federated_sum(tff.federated_map(
          steps.client_step, (clients, tff.federated_broadcast(estimate))))
      if step < max_iter:
        estimate = tff.federated_map(steps.server_step, (estimate, sums))
    # The last pass only measures the distances to the result.
    result, measurements = tff.federated_map(
        steps.finish, (estimate, sums, common.client_counts(cleaned.weight)))
    return tff.templates.MeasuredProcessOutput(state, result, measurements)

  return tff.templates.AggregationProcess(init_fn, next_fn)


class _Layout(NamedTuple):
  """How a step flattens the value: its tensors' specs and sizes, the dtype of the flat
  vectors, the groups Weiszfeld runs on (one per tensor, or one)."""
  value_type: object
  specs: list
  sizes: list
  dtype: object
  per_tensor: bool

  @classmethod
  def of(cls, value_type, per_tensor: bool) -> '_Layout':
    specs = tf.nest.flatten(tff.types.type_to_tf_tensor_specs(value_type))
    dtypes = {spec.dtype for spec in specs}
    return cls(value_type, specs, [spec.shape.num_elements() for spec in specs],
               dtypes.pop() if len(dtypes) == 1 else tf.float64, per_tensor)

  @property
  def num_groups(self) -> int:
    return len(self.sizes) if self.per_tensor else 1

  @property
  def num_values(self) -> int:
    return sum(self.sizes)

  def distances(self, x, z):
    """[num_groups] distances between two flat vectors."""
    squares = tf.square(x - z)
    if self.per_tensor:
      squares = tf.math.unsorted_segment_sum(
          squares, tf.repeat(tf.range(self.num_groups), self.sizes), self.num_groups)
    else:
      squares = tf.reduce_sum(squares, keepdims=True)
    return tf.sqrt(squares)

  def spread(self, group_values):
    """A [num_groups] vector spread over the flat vector's entries (or [1])."""
    return tf.repeat(group_values, self.sizes) if self.per_tensor else group_values

  def split(self, vector):
    return tf.split(vector, [self.num_values, self.num_groups, self.num_groups, -1])


class _Steps(NamedTuple):
  flatten: object
  weigh: object
  start: object
  client_step: object
  server_step: object
  finish: object


def _steps(layout: _Layout, exclude, *, floor: float, tolerance: float,
           relative: bool) -> _Steps:
  """The TensorFlow computations of a Weiszfeld round. A step passes flat vectors of
  ``layout.dtype``, so that the unrolled steps stay small for TFF to compile (it compiles
  every copy):
    client   [x (num_values), w]
    estimate [z (num_values), converged (groups), iterations (groups), sum_j w_j]
    sums     sum_j beta_j x_j, [sum_j beta_j (groups), sum_j w_j d_j (groups)]
  """
  dtype, num_values, num_groups = layout.dtype, layout.num_values, layout.num_groups
  estimate_type = tff.TensorType(dtype.as_numpy_dtype, [num_values + 2 * num_groups + 1])

  @tff.tensorflow.computation(exclude.type_signature.result)
  def flatten(client):
    return tf.concat([tf.reshape(tf.cast(t, dtype), [-1])
                      for t in tf.nest.flatten(client['value'])]
                     + [tf.cast(client['weight'][tf.newaxis], dtype)], 0)

  client_type = flatten.type_signature.result

  @tff.tensorflow.computation(client_type)
  def weigh(client):
    return tf.concat([client[:num_values] * client[-1], client[-1:]], 0)

  @tff.tensorflow.computation(client_type)
  def start(sums):
    total_weight = sums[-1:]
    median = tf.math.divide_no_nan(sums[:num_values], total_weight)
    return tf.concat([median, tf.zeros([2 * num_groups], dtype), total_weight], 0)

  @tff.tensorflow.computation(client_type, estimate_type)
  def client_step(client, estimate):
    x, weight = client[:num_values], client[-1]
    distance = layout.distances(x, estimate[:num_values])
    beta = weight / tf.maximum(distance, floor)
    return x * layout.spread(beta), tf.concat([beta, weight * distance], 0)

  @tff.tensorflow.computation(estimate_type, client_step.type_signature.result)
  def server_step(estimate, sums):
    z, converged, iterations, total_weight = layout.split(estimate)
    weighted, (beta, distance) = sums[0], tf.split(sums[1], 2)
    candidate = tf.math.divide_no_nan(weighted, layout.spread(beta))
    step = layout.distances(candidate, z)
    objective = tf.math.divide_no_nan(distance, total_weight)
    done = (converged > 0) | tf.equal(step, 0) | (
        step < tolerance * (objective if relative else 1.0))
    return tf.concat([tf.where(layout.spread(done), z, candidate), tf.cast(done, dtype),
                      iterations + tf.cast(tf.logical_not(done), dtype), total_weight], 0)

  @tff.tensorflow.computation(estimate_type, client_step.type_signature.result,
                              common.COUNTS_TYPE)
  def finish(estimate, sums, counts):
    median, _, iterations, total_weight = layout.split(estimate)
    objective = tf.math.divide_no_nan(tf.split(sums[1], 2)[1], total_weight)
    objective = tf.cast(objective, tf.float32)
    iterations = tf.cast(iterations, tf.int32)
    if not layout.per_tensor:
      objective, iterations = objective[0], iterations[0]
    result = tf.nest.pack_sequence_as(
        tff.types.type_to_tf_tensor_specs(layout.value_type),
        [tf.cast(tf.reshape(p, s.shape), s.dtype)
         for p, s in zip(tf.split(median, layout.sizes), layout.specs)])
    return result, collections.OrderedDict(counts, iterations=iterations, objective=objective)

  return _Steps(flatten, weigh, start, client_step, server_step, finish)
