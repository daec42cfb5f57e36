"""Krum and multi-Krum (Blanchard et al. 2017, §4) over the client updates.

The included clients' updates are stacked at the server. Client i's score is the sum of
its squared distances to its n - f - 2 nearest other included clients; the m clients of
lowest score (ties to the lower index) are averaged without weights. m = 1 is Krum, the
``krum`` aggregator; ``multi_krum`` has m = 2 by default. The NumPy twin is
``tff_noisy.ops.robust.krum``, which refuses n < f + 3. Here n is only known in the
round: when exclusions leave fewer clients, the score uses the single nearest other
client (none when n = 1), m shrinks to n, and ``neighbours`` reports what was used.
Measurements: ``excluded_clients``, ``included_clients``, ``selected`` (0/1 per client,
in client order), ``neighbours``. With every client excluded the result is zeros.
"""

import tensorflow as tf

from tff_noisy.federated.aggregators import common
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def _squared_distances(rows):
  """[n, n] float64 squared distances between clients, summed over their [n, size] rows.

  From the Gram matrix of the rows centred on their mean, so that no [n, n, size]
  difference tensor is formed and little cancels.
  """
  total = 0.0
  for x in rows:
    x = tf.cast(x, tf.float64)
    x -= tf.reduce_mean(x, axis=0, keepdims=True)
    norms = tf.reduce_sum(tf.square(x), axis=1)
    total += norms[:, tf.newaxis] + norms[tf.newaxis, :] - 2 * tf.matmul(x, x, transpose_b=True)
  return tf.maximum(total, 0.0)


class KrumFactory(tff.aggregators.WeightedAggregationFactory):
  """(Multi-)Krum tolerating f Byzantine clients; weight 0 only excludes a client."""

  def __init__(self, f: int = 1, m: int = 1):
    if f < 0 or m < 1:
      raise ValueError(f'Krum needs f >= 0 and m >= 1, got f={f}, m={m}')
    self._f, self._m = f, m

  def _rule(self, values, included):
    f, m = self._f, self._m
    indices = tf.cast(tf.where(included)[:, 0], tf.int32)
    n = tf.size(indices)
    rows = [tf.reshape(tf.gather(t, indices), [n, t.shape[1:].num_elements()])
            for t in tf.nest.flatten(values)]
    squared = tf.linalg.set_diag(_squared_distances(rows),
                                 tf.fill([n], tf.constant(float('inf'), tf.float64)))
    neighbours = tf.where(n - f - 2 >= 1, n - f - 2, tf.clip_by_value(n - 1, 0, 1))
    scores = tf.reduce_sum(tf.sort(squared, axis=1)[:, :neighbours], axis=1)
    chosen = tf.gather(indices, tf.math.top_k(-scores, k=tf.minimum(m, n)).indices)
    selected = tf.scatter_nd(chosen[:, tf.newaxis], tf.ones_like(chosen), tf.shape(included))

    def mean_of_chosen(t):
      return tf.cond(n > 0, lambda: tf.reduce_mean(tf.gather(t, chosen), axis=0),
                     lambda: tf.zeros(t.shape[1:], t.dtype))

    result = tf.nest.map_structure(mean_of_chosen, values)
    return result, {'selected': selected, 'neighbours': neighbours}

  def create(self, value_type, weight_type):
    return common.build_gathered_process(value_type, weight_type, self._rule)

  def in_process(self):
    return common.gathered_in_process(self._rule)
