"""RFA's geometric median of the whole update (Pillutla et al. 2022), federated-natively.

Smoothed Weiszfeld with the client weights, started at the weighted mean; the NumPy twin
is ``tff_noisy.ops.geometric_median.weiszfeld``, where ``eps`` and ``smoothing`` are
defined. Measurements: ``excluded_clients``, ``included_clients``, ``iterations`` and
``objective`` (the weighted mean distance of the clients to the result). With every client
excluded the result is zeros.
"""

from tff_noisy.federated.aggregators import weiszfeld
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


class GeometricMedianFactory(tff.aggregators.WeightedAggregationFactory):
  """Weighted geometric median of the clients' whole (flattened) updates."""

  def __init__(self, max_iter: int = 10, eps: float = 1e-5, smoothing: float = 1e-6):
    self._max_iter, self._eps, self._smoothing = max_iter, eps, smoothing

  def create(self, value_type, weight_type):
    return weiszfeld.build_weiszfeld_process(
        value_type, weight_type, per_tensor=False, weighted=True, max_iter=self._max_iter,
        floor=self._smoothing, tolerance=self._eps, relative=True)
