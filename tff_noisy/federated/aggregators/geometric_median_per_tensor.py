"""MaskedOptim's geometric median: Weiszfeld on each tensor, unweighted (MaskedOptim Alg. 2).

Per tensor: start at the mean of the included clients; a_i = 1/max(d_i, eps), normalised;
stop, keeping mu, once ||mu' - mu|| < eps; no client weights and no RFA smoothing. Run
federated-natively: each step broadcasts mu and sums a_i X_i
and a_i per tensor. The NumPy twin is ``tff_noisy.ops.geometric_median.weiszfeld_per_tensor``.
Measurements: ``excluded_clients``, ``included_clients``, and per tensor (in
``tf.nest.flatten`` order) ``iterations`` and ``objective`` (mean distance to the result).
"""

from tff_noisy.federated.aggregators import weiszfeld
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


class GeometricMedianPerTensorFactory(tff.aggregators.WeightedAggregationFactory):
  """Unweighted per-tensor geometric median; weight 0 only excludes a client."""

  def __init__(self, max_iter: int = 10, eps: float = 1e-5):
    self._max_iter, self._eps = max_iter, eps

  def create(self, value_type, weight_type):
    return weiszfeld.build_weiszfeld_process(
        value_type, weight_type, per_tensor=True, weighted=False, max_iter=self._max_iter,
        floor=self._eps, tolerance=self._eps, relative=False)
