"""A batch and its second view in one forward pass, shared by FedLSR and FedRG: the
2B batch whose second half trains nothing by itself (its aggregation weight is 0)."""

import tensorflow as tf

from tff_noisy.methods.contract import AGGREGATION_WEIGHT_KEY


def doubled_batch(batch, second_view):
  """The 2B batch: x then ``second_view``, every other field twice, and the aggregation
  weight (1 when absent) then 0."""
  size = tf.shape(batch['y'])[0]
  doubled = {name: tf.concat([value, value], axis=0) for name, value in batch.items()}
  doubled['x'] = tf.concat([batch['x'], tf.cast(second_view, batch['x'].dtype)], axis=0)
  weight = batch.get(AGGREGATION_WEIGHT_KEY, tf.ones([size]))
  doubled[AGGREGATION_WEIGHT_KEY] = tf.concat([weight, tf.zeros_like(weight)], axis=0)
  return doubled
