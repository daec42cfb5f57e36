"""Checks a whole experiment before any work starts: every registry's choices at once.

``config.py`` checks the fields it defines; the choices owned elsewhere (dataset,
partition and noise in ``data.federated``, the method and its typed parameters in
``methods``, the aggregator in ``federated.aggregators``, the model and its options in
``zoo``) are checked here, so that none of those modules needs to import another (no
import cycle, no TensorFlow).
"""

import dataclasses

from tff_noisy import methods
from tff_noisy import zoo
from tff_noisy.config import ExperimentConfig
from tff_noisy.data import federated as federated_data
from tff_noisy.federated import aggregators


@dataclasses.dataclass(frozen=True)
class Choices:
  """A validated experiment's resolved choices: what the driver builds from."""
  method_params: methods.Params
  aggregator_params: dict


def validate_experiment(config: ExperimentConfig) -> Choices:
  """Raises ConfigError naming the first bad field; returns the resolved choices."""
  federated_data.validate_config(config)
  zoo.validate(config.model.name, config.model.options())
  method_params = methods.validate(config)
  aggregator_params = aggregators.resolve_params(
      config.fl.aggregator, config.fl.aggregator_params, config.clients_per_round())
  return Choices(method_params, aggregator_params)
