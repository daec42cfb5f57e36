"""What a run is assembled from, given its config: the model builder, the optimisers, the
``Setup`` every method shares and the method itself (its recipe and federated process).

The driver, the TFLite export, ``evaluate`` and the benchmarks build through these, so a
method trains the same way wherever it is built.
"""

import dataclasses
import os
from typing import Callable, NamedTuple, Optional
import zipfile

import numpy as np
import tensorflow as tf

import models
from tff_noisy import methods
from tff_noisy import runtime
from tff_noisy import validation
from tff_noisy import config as config_lib
from tff_noisy.config import ConfigError, ExperimentConfig
from tff_noisy.data import federated as federated_data
from tff_noisy.errors import UserError
from tff_noisy.federated import aggregators
from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_work
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods import recipe as recipe_lib
from tff_noisy.simulation import results as results_lib
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def make_model_fn(config: ExperimentConfig, input_shape, num_classes,
                  model_fn: Optional[Callable] = None) -> Callable:
  """Checks the model fits the data (a ConfigError if not) and returns its builder.

  ``model_fn``: the user's own builder (``model.name: custom``), called once here to check
  that its model takes the data's inputs and gives one logit per class.
  """
  if model_fn is not None:
    try:
      models.checked_model(model_fn(), 'model_fn', tuple(input_shape), num_classes)
    except (TypeError, ValueError) as e:
      raise ConfigError(str(e)) from None
    return model_fn
  options = config.model.options()
  try:
    models.check_model_fits(config.model.name, tuple(input_shape), num_classes, **options)
  except ValueError as e:
    raise ConfigError(f'model.name: {e}') from None
  return lambda: models.build_model(config.model.name, tuple(input_shape), num_classes,
                                    **options)


def optimizers(config: ExperimentConfig) -> tuple:
  """``(client optimizer, server optimizer)`` of ``fl``."""
  fl = config.fl
  if fl.client_optimizer == 'adam':
    client = tff.learning.optimizers.build_adam(fl.client_lr)
  else:
    client = tff.learning.optimizers.build_sgdm(fl.client_lr, fl.momentum or None)
  return client, tff.learning.optimizers.build_sgdm(fl.server_lr)


def initial_state(process, model: tf.keras.Model):
  """The process's initial server state holding ``model``'s current weights."""
  weights = tf.nest.map_structure(lambda v: v.numpy(), client_work.model_weights_of(model))
  return process.set_model_weights(process.initialize(), weights)


def element_spec(data, fields: dict, batch_size: int):
  """The client datasets' element spec, with a method's per-example fields and shapes."""
  first = data.client_ids[0]
  extras = {name: np.zeros((1, *shape), dtype) for name, (dtype, shape) in fields.items()}
  return client_data_lib.make_client_data(data.x[first][:1], data.y[first][:1], batch_size,
                                          0, extras).dataset().element_spec


def median_client_steps(data, local_epochs: int, batch_size: int) -> Optional[int]:
  """Steps a round of the median client (its local epochs of batches); None without
  clients' data."""
  sizes = [len(y) for y in getattr(data, 'y', {}).values()]
  if not sizes:
    return None
  return local_epochs * client_data_lib.steps_per_pass(np.median(sizes), batch_size)


def base_setup(config: ExperimentConfig, data, choices: validation.Choices,
               model_fn: Callable) -> recipe_lib.Setup:
  """What the config fixes for every method, as a method's ``build`` receives it:
  ``model_fn`` the configured model's builder, no element spec and no client runtime yet
  (``build_method`` adds the clients' model, their element spec and where they train)."""
  client_optimizer, server_optimizer = optimizers(config)
  fl = config.fl
  return recipe_lib.Setup(
      model_fn=model_fn, element_spec=None, client_optimizer=client_optimizer,
      server_optimizer=server_optimizer,
      aggregator=aggregators.build_factory(fl.aggregator, choices.aggregator_params),
      local_epochs=fl.local_epochs, weight_decay=fl.weight_decay, seed=config.seed,
      rounds=fl.rounds, num_classes=data.num_classes, batch_size=fl.batch_size,
      client_lr=fl.client_lr, faults=config.faults.active())


def client_runtime(config: ExperimentConfig, data, setup: recipe_lib.Setup):
  """Where the clients train: ``program -> client runtime`` (``tff_noisy.runtime.build``),
  or None for TFF's own client work. ``fl.client_runtime: auto`` (a config no
  ``Simulation`` resolved, as in a benchmark) is this process's ``tf``."""
  fl = config_lib.resolve_client_runtime(config).fl
  return runtime.build(
      fl.client_runtime, model_fn=setup.model_fn, client_optimizer=setup.client_optimizer,
      local_epochs=fl.local_epochs, weight_decay=fl.weight_decay, batch_size=fl.batch_size,
      faults=config.faults.active(), clients_per_call=fl.clients_per_call,
      stack_clients=fl.stack_clients,
      median_client_steps=median_client_steps(data, fl.local_epochs, fl.batch_size))


class BuiltMethod(NamedTuple):
  """A config's method as the driver runs it."""
  recipe: recipe_lib.Recipe
  setup: recipe_lib.Setup  # With the clients' model, element spec and runtime.
  process: process_lib.FederatedProcess


def method_recipe(config: ExperimentConfig, setup: recipe_lib.Setup,
                  choices: validation.Choices) -> recipe_lib.Recipe:
  """The config's method's recipe, from its registry entry's ``build``."""
  name = config.method.name
  recipe = methods.METHODS[name].resolve()(choices.method_params, setup)
  if not isinstance(recipe, recipe_lib.Recipe):
    raise TypeError(f"method '{name}': its build returned {type(recipe).__name__}, not a "
                    'tff_noisy.methods.contract.Recipe')
  return recipe


def build_method(config: ExperimentConfig, data,
                 choices: Optional[validation.Choices] = None,
                 model_fn: Optional[Callable] = None) -> BuiltMethod:
  """The config's method: its recipe, built on what the config fixes for every method
  (``base_setup``), and its federated process. ``model_fn``: the user's own model
  builder, checked already (``make_model_fn``). The clients train the recipe's
  ``client_model`` of the configured model (Co-teaching's two networks)."""
  choices = choices or validation.validate_experiment(config, model_fn=model_fn)
  configured = model_fn or make_model_fn(config, data.input_shape, data.num_classes)
  setup = base_setup(config, data, choices, configured)
  recipe = method_recipe(config, setup, choices)
  program = ClientProgram(list(recipe.parts))
  if model_fn is not None and program.uses_features:
    try:
      models.features_and_logits(model_fn())
    except ValueError as e:
      raise ConfigError(f"model_fn: method '{config.method.name}' reads the features the "
                        f"model's logits layer takes: {e}") from None
  setup = dataclasses.replace(
      setup, model_fn=(recipe.client_model or (lambda fn: fn))(configured),
      element_spec=element_spec(data, recipe.data.field_specs(data), config.fl.batch_size))
  clients = client_runtime(config, data, setup)
  setup = dataclasses.replace(setup, clients=clients, probes_in_process=clients is not None)
  process = process_lib.build_process(
      setup.model_fn, setup.element_spec, setup.client_optimizer, setup.server_optimizer,
      program=program, model_aggregator=setup.aggregator, local_epochs=setup.local_epochs,
      weight_decay=setup.weight_decay, faults=setup.faults, client_runtime=clients,
      controller=dict(recipe.controller))
  return BuiltMethod(recipe, setup, process)


def client_program(config: ExperimentConfig, data):
  """``(setup, ClientProgram)`` of the config's clients, without a process or a client
  runtime (TFLite export)."""
  choices = validation.validate_experiment(config)
  setup = base_setup(config, data, choices,
                     make_model_fn(config, data.input_shape, data.num_classes))
  return setup, ClientProgram(list(method_recipe(config, setup, choices).parts))


class FinishedRun(NamedTuple):
  results: dict  # results.json
  config: ExperimentConfig
  data: federated_data.FederatedData
  model: tf.keras.Model  # With the run's final weights.


def describe_runtime(process, on_workers: bool = False) -> dict:
  """Where a process's clients trained and were aggregated (results.json ``runtime``)."""
  return runtime.describe(process, on_workers)


def load_finished_run(run_dir: str) -> FinishedRun:
  """A finished run's results, config, federated data (rebuilt or read from the cache)
  and final model.

  Raises:
    FileNotFoundError: ``run_dir`` has no results.json or final_weights.npz.
    UserError: results.json or final_weights.npz cannot be read, or the weights do not
      fit the run's model (the message names the file).
  """
  results = results_lib.load(run_dir)
  config_values = results.get('config', {})
  for section, custom in (('data', federated_data.CUSTOM), ('model', validation.CUSTOM_MODEL)):
    if config_values.get(section, {}).get({'data': 'dataset', 'model': 'name'}[section]) == custom:
      raise UserError(f'{run_dir}: this run trained on a {section} given in Python '
                      f'({section} {custom}), which the command line cannot rebuild; its '
                      f'final weights are {results_lib.WEIGHTS_FILE}, in the order of the '
                      "model's get_weights()")
  try:
    weights = results_lib.load_final_weights(run_dir)
  except (ValueError, EOFError, zipfile.BadZipFile) as e:
    raise UserError(f'{os.path.join(run_dir, results_lib.WEIGHTS_FILE)} cannot be read '
                    f'({e}); write it again with `tff-noisy run CONFIG --out {run_dir} '
                    '--resume`') from None
  config = config_lib.from_dict(results['config'])
  data = federated_data.build_federated_data(config)
  model = make_model_fn(config, data.input_shape, data.num_classes)()
  expected = [tuple(w.shape) for w in model.get_weights()]
  if [tuple(w.shape) for w in weights] != expected:
    raise UserError(f'{os.path.join(run_dir, results_lib.WEIGHTS_FILE)} holds '
                    f'{len(weights)} arrays that do not fit the run\'s model '
                    f'({config.model.name}: {len(expected)} weight arrays); it belongs to '
                    f'another run: write it again with `tff-noisy run CONFIG --out {run_dir} '
                    '--resume`')
  model.set_weights(weights)
  return FinishedRun(results, config, data, model)
