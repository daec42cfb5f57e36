"""Checks a whole experiment before any work starts: every registry's choices at once.

``config.py`` checks the fields it defines; the choices owned elsewhere (dataset,
partition and noise in ``data.federated``, the method and its typed parameters in
``methods``, the aggregator in ``federated.aggregators``, the model and its options in
``zoo``) are checked here, so that none of those modules needs to import another (no
import cycle, no TensorFlow).
"""

import dataclasses

from tff_noisy import extensions
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


CUSTOM_MODEL = 'custom'  # model.name of a run whose model_fn comes from Python.


def validate_experiment(config: ExperimentConfig, data=None, model_fn=None) -> Choices:
  """Raises ConfigError naming the first bad field; returns the resolved choices.

  ``data``, ``model_fn``: the user's own federated data (``data.dataset: custom``) and
  model builder (``model.name: custom``), given in Python.
  """
  extensions.import_modules(config.imports)  # Done already if it came from a file or dict.
  federated_data.validate_config(config, data)
  if model_fn is not None or config.model.name == CUSTOM_MODEL:
    if config.model.name != CUSTOM_MODEL:
      raise ConfigError(f"model.name: '{config.model.name}', but a model_fn came from "
                        f'Python; set model.name: {CUSTOM_MODEL} to train it')
    if not callable(model_fn):
      raise ConfigError(f'model.name: {CUSTOM_MODEL} builds its model with a model_fn from '
                        'Python: tff_noisy.run(config, model_fn=...), a function returning '
                        'a new tf.keras.Model')
    if config.model.options():
      raise ConfigError(f'model.{next(iter(config.model.options()))}: not used with '
                        f'model.name: {CUSTOM_MODEL} (your model_fn builds the model)')
  else:
    zoo.resolve_options(config.model.name, config.model.options())
  method_params = methods.validate(config, data)
  aggregator_params = aggregators.resolve_params(
      config.fl.aggregator, config.fl.aggregator_params, config.clients_per_round())
  return Choices(method_params, aggregator_params)
