"""The weighted mean: ``tff.aggregators.MeanFactory`` unchanged, with exclusion counts added.

Its result is MeanFactory's, byte for byte (the default aggregator before there was a
choice). A weight-0 client adds nothing to either sum; with every client excluded the
result is 0/0 = NaN, which the finalizer refuses, leaving the model as it was.
Measurements: MeanFactory's, plus ``excluded_clients`` (weight 0) and ``included_clients``.
``in_process()``: the same sums over updates stacked in this process (``common``).
"""

import collections

import tensorflow as tf

from tff_noisy.federated.aggregators import common
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


class MeanAggregatorFactory(tff.aggregators.WeightedAggregationFactory):
  """``tff.aggregators.MeanFactory()`` reporting how many clients had weight 0."""

  def create(self, value_type, weight_type):
    common.check_types(value_type, weight_type)

    def counts(value, weight):
      del value
      return common.client_counts(weight)

    return tff.aggregators.add_measurements(
        tff.aggregators.MeanFactory(), client_measurement_fn=counts).create(
            value_type, weight_type)

  def in_process(self):
    """``(stacked updates, weights [J]) -> (sum_j w_j u_j / sum_j w_j, measurements)``."""

    @tf.function(reduce_retracing=True)  # Rounds differ in their number of clients.
    def weighted_mean(values, weights):
      weights = tf.cast(weights, tf.float32)

      def mean(t):
        scaled = t * tf.reshape(weights, [-1] + [1] * (t.shape.rank - 1))
        return tf.reduce_sum(scaled, axis=0) / tf.reduce_sum(weights)

      return tf.nest.map_structure(mean, values), collections.OrderedDict(
          mean_value=(), mean_weight=(), **common.counts_of(weights > 0))

    return weighted_mean
