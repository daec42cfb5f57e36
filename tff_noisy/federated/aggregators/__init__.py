"""Server aggregators a config can name (``fl.aggregator``), one factory per module.

Every aggregator is a weighted ``tff.aggregators`` factory for model-weights-shaped
updates, computed inside the federated computation, with a pure NumPy twin in
``tff_noisy.ops``. Each leaves out the clients whose weight is 0 (the client work zeroes a
non-finite update and gives it weight 0) and reports ``excluded_clients``. The registry
``AGGREGATORS`` gives each one's typed parameters (``params``), factory and summary.

This module imports no TensorFlow: config validation uses :func:`resolve_params` before
anything heavy is loaded; :func:`build_factory` imports the factory's module.
"""

import dataclasses
import importlib

from tff_noisy.errors import ConfigError
from tff_noisy.federated.aggregators import params as params_lib
from tff_noisy.params import did_you_mean


@dataclasses.dataclass(frozen=True)
class AggregatorSpec:
  params: type  # Its ``params_lib.AggregatorParams`` subclass.
  factory: str  # 'module:Class' of its factory in this package (imports TensorFlow).
  summary: str  # One line: what the server computes.


AGGREGATORS = {
    'mean': AggregatorSpec(
        params_lib.AggregatorParams, 'mean:MeanAggregatorFactory',
        'Weighted mean, tff.aggregators.MeanFactory unchanged (the default)'),
    'geometric_median': AggregatorSpec(
        params_lib.GeometricMedianParams, 'geometric_median:GeometricMedianFactory',
        "RFA's smoothed Weiszfeld on the whole update, weighted (Pillutla et al. 2022)"),
    'geometric_median_per_tensor': AggregatorSpec(
        params_lib.GeometricMedianPerTensorParams,
        'geometric_median_per_tensor:GeometricMedianPerTensorFactory',
        "MaskedOptim's unweighted Weiszfeld on each weight tensor"),
    'coordinate_median': AggregatorSpec(
        params_lib.AggregatorParams, 'coordinate_median:CoordinateMedianFactory',
        'Per-coordinate median, unweighted (Yin et al. 2018)'),
    'trimmed_mean': AggregatorSpec(
        params_lib.TrimmedMeanParams, 'trimmed_mean:TrimmedMeanFactory',
        'Per-coordinate mean without the beta-fraction largest and smallest values, '
        'unweighted (Yin et al. 2018)'),
    'krum': AggregatorSpec(
        params_lib.KrumParams, 'krum:KrumFactory',
        'The update with the smallest sum of squared distances to its n - f - 2 nearest '
        'others (Blanchard et al. 2017)'),
    'multi_krum': AggregatorSpec(params_lib.MultiKrumParams, 'krum:KrumFactory',
                                 'The mean of the m best updates by the Krum score'),
}


def resolve_params(name: str, params: dict, clients_per_round: int) -> dict:
  """Returns the aggregator's parameters with defaults filled in; raises ConfigError.

  ``clients_per_round`` is n, the clients sampled per round; Krum's limits depend on it.
  """
  if name not in AGGREGATORS:
    raise ConfigError(f"fl.aggregator: unknown aggregator '{name}'"
                      f"{did_you_mean(name, AGGREGATORS)} Allowed: {', '.join(AGGREGATORS)}")
  return AGGREGATORS[name].params.from_mapping(params, clients_per_round, name).as_dict()


def build_factory(name: str, params: dict):
  """The ``tff.aggregators.WeightedAggregationFactory`` for a resolved aggregator."""
  module_name, _, class_name = AGGREGATORS[name].factory.partition(':')
  module = importlib.import_module(f'{__name__}.{module_name}')
  return getattr(module, class_name)(**params)
