"""Coordinate-wise median of the client updates (Yin et al. 2018, Def. 1).

The included clients' updates are stacked at the server and each coordinate takes the
median of its n values, the mean of the middle two for even n; unweighted, as in the
paper. The NumPy twin is ``tff_noisy.ops.robust.coordinate_median``.
Measurements: ``excluded_clients``, ``included_clients``. With every client excluded the
result is zeros.
"""

import tensorflow as tf

from tff_noisy.federated.aggregators import common
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def _median(stacked, included):
  """Median over axis 0 of the included rows of a [J, ...] tensor (zeros if none)."""
  values = tf.sort(tf.boolean_mask(stacked, included), axis=0)
  n = tf.shape(values)[0]
  return tf.cond(n > 0, lambda: (values[(n - 1) // 2] + values[n // 2]) / 2,
                 lambda: tf.zeros(stacked.shape[1:], stacked.dtype))


def _rule(values, included):
  return tf.nest.map_structure(lambda t: _median(t, included), values), {}


class CoordinateMedianFactory(tff.aggregators.WeightedAggregationFactory):
  """Unweighted per-coordinate median; weight 0 only excludes a client."""

  def create(self, value_type, weight_type):
    return common.build_gathered_process(value_type, weight_type, _rule)

  def in_process(self):
    return common.gathered_in_process(_rule)
