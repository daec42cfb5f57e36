"""The weighted mean: ``tff.aggregators.MeanFactory`` unchanged, with exclusion counts added.

Its result is MeanFactory's, byte for byte (the default aggregator before there was a
choice). A weight-0 client adds nothing to either sum; with every client excluded the
result is 0/0 = NaN, which the finalizer refuses, leaving the model as it was.
Measurements: MeanFactory's, plus ``excluded_clients`` (weight 0) and ``included_clients``.
``in_process()``: the same sums over updates stacked in this process, as row blocks in
client order (``client_work.stacked_update_blocks``): on the CPU read block by block in
TensorFlow's own order of addition (``ordered_sum``), so its result is the one
``tf.reduce_sum`` gives over all the rows at once, bit for bit.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.federated.aggregators import common
from tff_noisy.federated.aggregators import ordered_sum
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
    """``(update row blocks, weights [J]) -> (sum_j w_j u_j / sum_j w_j, measurements)``."""
    width = ordered_sum.packet_width()

    def weighted_mean(blocks, weights):
      weights = np.asarray(weights, np.float32)
      total_weight = tf.reduce_sum(weights)

      def mean(*leaf_blocks):
        if width and ordered_sum.summable(leaf_blocks[0].shape[1:]):
          leaf_sum = ordered_sum.weighted_row_sum(
              [np.asarray(b) for b in leaf_blocks], weights, width)
        else:
          leaf_sum = ordered_sum.tensorflow_weighted_sum(
              tf.concat(leaf_blocks, 0) if len(leaf_blocks) > 1 else leaf_blocks[0], weights)
        return tf.convert_to_tensor(leaf_sum) / total_weight

      return tf.nest.map_structure(mean, *blocks), collections.OrderedDict(
          mean_value=(), mean_weight=(), **common.counts_of(weights > 0))

    return weighted_mean
