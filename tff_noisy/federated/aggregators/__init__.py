"""Server aggregators a config can name (``fl.aggregator``), one factory per module.

Every aggregator is a weighted ``tff.aggregators`` factory for model-weights-shaped
updates, computed inside the federated computation, with a pure NumPy twin in
``tff_noisy.ops``. Each leaves out the clients whose weight is 0 (the client work zeroes a
non-finite update and gives it weight 0) and reports ``excluded_clients``. The registry
``AGGREGATORS`` gives each one's summary, typed parameters (``params``) and factory (its
target).

This module imports no TensorFlow: config validation uses :func:`resolve_params` before
anything heavy is loaded; :func:`build_factory` imports the factory's module.
"""

from tff_noisy import registry
from tff_noisy.federated.aggregators import params as params_lib

_FACTORIES = __name__ + '.'  # Each factory's module is in this package.

AGGREGATORS = registry.Registry('fl.aggregator', 'aggregator', {
    'mean': registry.Entry(
        'Weighted mean, tff.aggregators.MeanFactory unchanged (the default)',
        params_lib.AggregatorParams, _FACTORIES + 'mean:MeanAggregatorFactory'),
    'geometric_median': registry.Entry(
        "RFA's smoothed Weiszfeld on the whole update, weighted (Pillutla et al. 2022)",
        params_lib.GeometricMedianParams,
        _FACTORIES + 'geometric_median:GeometricMedianFactory'),
    'geometric_median_per_tensor': registry.Entry(
        "MaskedOptim's unweighted Weiszfeld on each weight tensor",
        params_lib.GeometricMedianPerTensorParams,
        _FACTORIES + 'geometric_median_per_tensor:GeometricMedianPerTensorFactory'),
    'coordinate_median': registry.Entry(
        'Per-coordinate median, unweighted (Yin et al. 2018)', params_lib.AggregatorParams,
        _FACTORIES + 'coordinate_median:CoordinateMedianFactory'),
    'trimmed_mean': registry.Entry(
        'Per-coordinate mean without the beta-fraction largest and smallest values, '
        'unweighted (Yin et al. 2018)', params_lib.TrimmedMeanParams,
        _FACTORIES + 'trimmed_mean:TrimmedMeanFactory'),
    'krum': registry.Entry(
        'The update with the smallest sum of squared distances to its n - f - 2 nearest '
        'others (Blanchard et al. 2017)', params_lib.KrumParams,
        _FACTORIES + 'krum:KrumFactory'),
    'multi_krum': registry.Entry('The mean of the m best updates by the Krum score',
                                 params_lib.MultiKrumParams, _FACTORIES + 'krum:KrumFactory'),
})


def resolve_params(name: str, params: dict, clients_per_round: int) -> dict:
  """Returns the aggregator's parameters with defaults filled in; raises ConfigError.

  ``clients_per_round`` is n, the clients sampled per round; Krum's limits depend on it.
  """
  return AGGREGATORS.lookup(name).params.from_mapping(params, clients_per_round,
                                                      name).as_dict()


def build_factory(name: str, params: dict):
  """The ``tff.aggregators.WeightedAggregationFactory`` for a resolved aggregator."""
  return AGGREGATORS[name].resolve()(**params)
