"""The server rules as ``tff.aggregators.WeightedAggregationFactory`` objects, for TFF's
own builders as much as for ``tff_noisy.build`` (``docs/python-api.md``)::

    process = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, client_optimizer_fn=..., model_aggregator=tff_noisy.aggregators.krum(f=1))

Each factory leaves out the clients whose weight is 0 (a non-finite update) and reports
``excluded_clients`` among its measurements. Parameters are checked as a config's
``fl.aggregator_params`` are (a ``ConfigError`` naming the parameter). Krum's limits
depend on the clients per round, which a factory does not know: give it as
``clients_per_round`` to have them checked here.
"""

from tff_noisy.federated import aggregators as _registry


def _factory(name: str, clients_per_round=None, **params):
  """The ``name`` aggregator's factory with ``params`` checked."""
  context = clients_per_round if clients_per_round is not None else 10**9
  return _registry.build_factory(name, _registry.resolve_params(name, params, context))


def mean():
  """The weighted mean: ``tff.aggregators.MeanFactory`` (FedAvg's rule)."""
  return _factory('mean')


def geometric_median(*, max_iter: int = 10, eps: float = 1e-5, smoothing: float = 1e-6):
  """The weighted geometric median of the whole update by RFA's smoothed Weiszfeld
  iterations (Pillutla et al. 2022, Algorithm 3)."""
  return _factory('geometric_median', max_iter=max_iter, eps=eps, smoothing=smoothing)


def geometric_median_per_tensor(*, max_iter: int = 10, eps: float = 1e-5):
  """MaskedOptim's unweighted Weiszfeld geometric median of each weight tensor."""
  return _factory('geometric_median_per_tensor', max_iter=max_iter, eps=eps)


def coordinate_median():
  """The unweighted per-coordinate median (Yin et al. 2018)."""
  return _factory('coordinate_median')


def trimmed_mean(*, beta: float = 0.1):
  """The per-coordinate mean without the ``beta`` fraction of largest and smallest
  values, unweighted (Yin et al. 2018)."""
  return _factory('trimmed_mean', beta=beta)


def krum(*, f: int = 1, clients_per_round=None):
  """The update with the smallest sum of squared distances to its n - f - 2 nearest
  others (Blanchard et al. 2017)."""
  return _factory('krum', clients_per_round, f=f)


def multi_krum(*, f: int = 1, m: int = 2, clients_per_round=None):
  """The mean of the ``m`` updates with the best Krum scores (Blanchard et al. 2017)."""
  return _factory('multi_krum', clients_per_round, f=f, m=m)
