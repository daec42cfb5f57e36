"""Coordinate-wise trimmed mean of the client updates (Yin et al. 2018, Def. 2).

The included clients' updates are stacked at the server; per coordinate the
k = floor(beta * n) largest and k smallest of the n values are dropped and the rest
averaged, unweighted as in the paper. The NumPy twin is
``tff_noisy.ops.robust.trimmed_mean``. Measurements: ``excluded_clients``,
``included_clients``, ``trimmed_per_end`` (k). With every client excluded the result is
zeros.
"""

import tensorflow as tf

from tff_noisy.federated.aggregators import common
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


class TrimmedMeanFactory(tff.aggregators.WeightedAggregationFactory):
  """Unweighted per-coordinate beta-trimmed mean; weight 0 only excludes a client."""

  def __init__(self, beta: float = 0.1):
    if not 0 <= beta < 0.5:
      raise ValueError(f'beta must be in [0, 0.5), got {beta}')
    self._beta = beta

  def _rule(self, values, included):
    n = tf.reduce_sum(tf.cast(included, tf.int32))
    # float64, as in ops.robust.num_trimmed, so that both floor beta * n alike.
    k = tf.cast(tf.floor(self._beta * tf.cast(n, tf.float64)), tf.int32)

    def trimmed(stacked):
      kept = lambda: tf.sort(tf.boolean_mask(stacked, included), axis=0)[k:n - k]
      return tf.cond(n > 0, lambda: tf.reduce_mean(kept(), axis=0),
                     lambda: tf.zeros(stacked.shape[1:], stacked.dtype))

    return tf.nest.map_structure(trimmed, values), {'trimmed_per_end': k}

  def create(self, value_type, weight_type):
    return common.build_gathered_process(value_type, weight_type, self._rule)

  def in_process(self):
    return common.gathered_in_process(self._rule)
