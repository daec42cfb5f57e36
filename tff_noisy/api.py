"""The Python API: what ``import tff_noisy`` offers (``docs/python-api.md``).

- ``federated_data`` / ``federated_data_from_client_data``: the user's own clients;
- ``add_noise``: the papers' label noise on the user's labels, with what it flipped;
- ``build``: a method as one process, ``initialize()`` and ``next(state, client_ids)``,
  on the user's ``model_fn`` and data, its server decisions inside ``next`` and its
  per-client state held in the process state;
- ``run`` / ``compare``: whole runs from a config (a YAML path, a mapping or an
  ``ExperimentConfig``), returning the ``Results`` that ``results.json`` holds;
- ``export``: a run's final model as a TFLite file with its sidecar (``tff-noisy
  export``), also for a run on data and a model given in Python;
- ``tff_noisy.aggregators``: the server rules as ``tff.aggregators`` factories.

Every argument is checked here, before TensorFlow Federated sees it: a wrong one is a
``TypeError``/``ValueError`` (or a ``ConfigError``, a ``ValueError``) that names it.
Every entry point runs in any thread (``tff_runtime.use_in_this_thread``).
"""

import dataclasses
import os
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import tff_runtime
from tff_noisy import validation
from tff_noisy.data import custom
from tff_noisy.data import noise as noise_lib
from tff_noisy.data import params as data_params
from tff_noisy.data.federated import CUSTOM, FederatedData
from tff_noisy.params import Params
from tff_noisy.simulation import run_dir

federated_data = custom.from_arrays
federated_data_from_client_data = custom.from_client_data
ConfigLike = Union[str, dict, config_lib.ExperimentConfig]


class NoisyLabels(NamedTuple):
  """What ``add_noise`` did to each client's labels (lists in the clients' order)."""
  labels: list  # Each client's labels after the noise, int64 [n_m].
  flipped: list  # Each client's mask of changed labels, bool [n_m].
  noisy_clients: list  # The positions of the clients the noise model made noisy.
  # Each client's transition matrix T[true i, observed j] the labels were drawn from
  # (None for a clean client; for ``cleanlab`` the exact counts were assigned from it).
  matrices: list


def add_noise(labels: Sequence, num_classes: int, noise: Union[dict, config_lib.NoiseConfig],
              *, seed: int = 0) -> NoisyLabels:
  """The papers' label noise on the user's labels, one array per client.

  ``noise``: a ``NoiseConfig`` or its mapping (``{'name': 'symmetric', 'rate': 0.4,
  'noisy_fraction': 0.5}``), checked as a config's ``noise`` section is; ``seed``: the
  same seed gives the same flips (a run with this ``seed`` and ``noise`` flips the same
  labels of the same data).
  """
  if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence) or not labels:
    raise TypeError('labels: expected a non-empty list with one label array per client, got '
                    f'{type(labels).__name__}')
  custom.check_num_classes(num_classes)
  noise = _noise_config(noise, num_classes)
  if not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
    raise ValueError(f'seed: expected an integer in [0, 2**32), got {seed!r}')
  true = [custom.labels(y, f'labels[{m}]', num_classes) for m, y in enumerate(labels)]
  noisy = noise_lib.apply_noise(true, num_classes, noise, int(seed))
  matrices = noise_lib.client_matrices(len(true), num_classes, noise, int(seed))
  flipped = [y != t for y, t in zip(noisy, true)]
  return NoisyLabels(noisy, flipped,
                     [m for m, matrix in enumerate(matrices) if matrix is not None],
                     matrices)


def _noise_config(noise, num_classes: int) -> config_lib.NoiseConfig:
  """``noise`` as a checked ``NoiseConfig`` (ConfigError naming ``noise.FIELD``)."""
  if isinstance(noise, dict):
    noise = config_lib.from_dict({'noise': noise}).noise
  if not isinstance(noise, config_lib.NoiseConfig):
    raise TypeError(f'noise: expected a mapping or a NoiseConfig, got {type(noise).__name__}')
  noise_model = noise_lib.NOISE_MODELS.lookup(noise.name)
  if noise.name == 'real':
    raise config_lib.ConfigError("noise.name: real takes a dataset's own noisy labels "
                                 '(CIFAR-N); add_noise draws noise on the labels it is given')
  data_params.resolve(noise_model.params, noise,
                      data_params.Context(CUSTOM, num_classes, (), ()))
  return noise


def load_config(config: ConfigLike, data: Optional[FederatedData] = None,
                model_fn: Optional[Callable] = None) -> config_lib.ExperimentConfig:
  """A checked config from a YAML path, a mapping or an ``ExperimentConfig``.

  With ``data`` it trains on that data (``data.dataset: custom``, ``partition.num_clients``
  its clients); with ``model_fn`` on that model (``model.name: custom``). A config that
  names another dataset or model than the one given is refused. Every choice is checked
  (``ConfigError`` naming the field), as ``tff-noisy run`` checks a YAML file.
  """
  return _checked_config(config, data, model_fn)[0]


def _checked_config(config: ConfigLike, data, model_fn) -> tuple:
  """``(load_config(...), its validation.Choices)``."""
  config = _as_config(config, data, model_fn)
  return config, validation.validate_experiment(config, data, model_fn)


def _as_config(config: ConfigLike, data, model_fn) -> config_lib.ExperimentConfig:
  """``config`` as an ``ExperimentConfig`` on ``data`` and ``model_fn``; its own fields
  checked once ``data`` has set the clients, not yet the registries' choices (a compare
  checks each method's config)."""
  if isinstance(config, (str, os.PathLike)):
    config = config_lib.load(os.fspath(config), validated=False)
  elif isinstance(config, dict):
    config = config_lib.parse(config)
  elif not isinstance(config, config_lib.ExperimentConfig):
    raise TypeError('config: expected a YAML path, a mapping or an ExperimentConfig, got '
                    f'{type(config).__name__}')
  defaults = config_lib.ExperimentConfig()
  values = config.to_dict()
  if data is not None:
    if not isinstance(data, FederatedData):
      raise TypeError('data: expected tff_noisy.federated_data(...) or '
                      f'tff_noisy.federated_data_from_client_data(...), got '
                      f'{type(data).__name__}')
    if config.data.dataset not in (defaults.data.dataset, CUSTOM):
      raise config_lib.ConfigError(f"data.dataset: '{config.data.dataset}', but data= was "
                                   'given; leave data.dataset unset (or custom)')
    values['data']['dataset'] = CUSTOM
    values['partition']['num_clients'] = len(data.client_ids)
  if model_fn is not None:
    if not callable(model_fn) or hasattr(model_fn, 'trainable_variables'):
      raise TypeError('model_fn: expected a function returning a new tf.keras.Model, got '
                      f'{type(model_fn).__name__} (each call must build a new model)')
    if config.model.name not in (defaults.model.name, validation.CUSTOM_MODEL):
      raise config_lib.ConfigError(f"model.name: '{config.model.name}', but model_fn= was "
                                   'given; leave model.name unset (or custom)')
    values['model']['name'] = validation.CUSTOM_MODEL
  return config_lib.from_dict(values)


def run(config: ConfigLike, *, data: Optional[FederatedData] = None,
        model_fn: Optional[Callable] = None, out: Optional[str] = None,
        resume: bool = False, overwrite: bool = False, progress: Optional[bool] = False,
        workers: Optional[Sequence[str]] = None):
  """Runs one experiment; returns its ``Results`` (``results.json``'s fields, and the
  final weights in ``final_weights``).

  ``out``: the run directory the command line writes (results.json, metrics.csv,
  checkpoints, TensorBoard), held as ``tff-noisy run --out`` holds it: a directory that
  holds files is refused unless ``resume`` (continue from its checkpoints) or
  ``overwrite`` (first remove the earlier run's outputs, and only those); None keeps
  everything in memory. ``progress``: a progress bar on stderr (None: as ``tff-noisy
  run`` shows it). ``workers``: ``host:port`` of TFF workers to train on.
  """
  _check_out(out, resume, overwrite)
  tff_runtime.use_in_this_thread()
  config, choices = _checked_config(config, data, model_fn)
  return run_dir.run_experiment(config, out, resume=resume, overwrite=overwrite,
                                flags=run_dir.PYTHON, progress=progress, workers=workers,
                                choices=choices, data=data, model_fn=model_fn)


def _check_out(out, resume: bool, overwrite: bool) -> None:
  """``out`` a path, and ``resume`` or ``overwrite`` (not both) only with it."""
  if out is not None and not isinstance(out, (str, os.PathLike)):
    raise TypeError(f'out: expected a directory path, got {type(out).__name__}')
  if resume and overwrite:
    raise ValueError('resume, overwrite: give one of them (resume continues the run in out, '
                     'overwrite replaces it)')
  for name, given in (('resume', resume), ('overwrite', overwrite)):
    if given and out is None:
      raise ValueError(f'{name}: needs out, the run directory it applies to')


def compare(config: ConfigLike, method_names: Sequence[str], *,
            data: Optional[FederatedData] = None, model_fn: Optional[Callable] = None,
            out: Optional[str] = None, resume: bool = False, overwrite: bool = False,
            progress: Optional[bool] = False) -> Dict[str, object]:
  """Runs ``config`` once per method on the same data; ``{method: Results}``.

  ``out``: as ``tff-noisy compare --out`` (a folder per method, comparison.csv and
  comparison.png), held as the command line holds it, with ``resume`` and ``overwrite``
  as ``run``'s; None keeps everything in memory.
  """
  from tff_noisy.simulation import studies  # pylint: disable=import-outside-toplevel
  tff_runtime.use_in_this_thread()
  if isinstance(method_names, str) or not method_names:
    raise TypeError('method_names: expected a non-empty list of method names, got '
                    f'{method_names!r}')
  _check_out(out, resume, overwrite)
  config = _as_config(config, data, model_fn)
  planned = studies.method_configs(config, list(method_names), data=data, model_fn=model_fn)

  def run_one(method_config, method_dir, choices):
    return run_dir.run_experiment(method_config, method_dir, resume=resume,
                                  overwrite=overwrite, flags=run_dir.PYTHON,
                                  progress=progress, choices=choices, data=data,
                                  model_fn=model_fn)

  if out is None:
    return {name: run_one(method_config, None, choices)
            for name, (method_config, choices) in planned.items()}
  out = os.fspath(out)
  with run_dir.claim(out, resume=resume, overwrite=overwrite, flags=run_dir.PYTHON):
    return dict(studies.compare(config, list(method_names), out, run_one,
                                data=data, model_fn=model_fn))


def export(results, path: str, *, data: Optional[FederatedData] = None,
           model_fn: Optional[Callable] = None, quantize: str = 'none',
           representative_size: int = 200, integer_io: bool = False,
           verify: bool = False) -> dict:
  """Writes a run's final model as the TFLite file ``path`` with its JSON sidecar (the
  same name, ``.json``), as ``tff-noisy export`` does; returns what it wrote.

  ``results``: the ``Results`` that ``run`` or ``compare`` returned, or the ``out=``
  directory of a finished run. ``data``, ``model_fn``: the ones the run trained on when
  they were given in Python (the data is checked against the run's ``data_hash``); a
  run of a registered dataset and model rebuilds them from its config. ``quantize``:
  ``none``, ``float16``, ``dynamic`` or ``int8`` (calibrated on ``representative_size``
  of the clients' training inputs; ``integer_io``: int8 input and output tensors).
  ``verify``: also runs Keras and TFLite on the test split.

  Returns ``model``, ``sidecar``, ``bytes``, ``quantize``, ``config_hash`` and, with
  ``verify``, ``agreement`` (top-1, TFLite against Keras), ``keras_accuracy``,
  ``tflite_accuracy`` and ``n``.
  """
  from tflite_export import options  # pylint: disable=import-outside-toplevel
  from tff_noisy.simulation import results as results_lib  # pylint: disable=import-outside-toplevel
  if isinstance(results, (str, os.PathLike)):
    directory = os.fspath(results)
    results = results_lib.Results.from_dict(results_lib.load(directory))
    results.final_weights = results_lib.load_final_weights(directory)
  elif not isinstance(results, results_lib.Results):
    raise TypeError('results: expected the Results that run() or compare() returned, or a '
                    f'finished run directory, got {type(results).__name__}')
  if results.final_weights is None:
    raise ValueError('results: holds no final_weights (the Results that run() or compare() '
                     'return hold them)')
  if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
    raise TypeError(f'path: expected the .tflite file to write, got {path!r}')
  options.check_options(quantize, representative_size, integer_io)
  config = config_lib.from_dict(results.config)
  for name, given, what, section, custom_name in (
      ('data', data, 'data', 'data.dataset', CUSTOM),
      ('model_fn', model_fn, 'a model', 'model.name', validation.CUSTOM_MODEL)):
    recorded = config.data.dataset if name == 'data' else config.model.name
    if recorded == custom_name and given is None:
      raise ValueError(f'{name}: this run trained on {what} given in Python ({section} '
                       f'{custom_name}); pass the same {name}=')
    if recorded != custom_name and given is not None:
      raise ValueError(f'{name}: this run trained on {section} {recorded}, rebuilt from '
                       f'its config; leave {name} unset')
  if data is not None and not isinstance(data, FederatedData):
    raise TypeError('data: expected tff_noisy.federated_data(...), got '
                    f'{type(data).__name__}')
  if verify and data is not None and not len(data.y_test):
    raise ValueError('verify: data has no test split (federated_data(..., test=(x, y)))')
  # pylint: disable=import-outside-toplevel
  from tff_noisy.data import federated as federated_lib
  from tff_noisy.simulation import assembly
  from tflite_export import export as export_lib
  # pylint: enable=import-outside-toplevel
  given_in_python = data is not None
  if data is None:
    data = federated_lib.build_federated_data(config)
  else:
    data = custom.with_noise(data, config.noise, config.seed)  # As the run trained on it.
    if data.config_hash != results.data_hash:
      raise ValueError(f'data: not the data this run trained on (data_hash '
                       f'{data.config_hash}, the run\'s {results.data_hash})')
  model = assembly.make_model_fn(config, data.input_shape, data.num_classes, model_fn)()
  shapes = [tuple(w.shape) for w in model.get_weights()]
  if [tuple(w.shape) for w in results.final_weights] != shapes:
    raise ValueError(f'results: its {len(results.final_weights)} final weight arrays do not '
                     f"fit the model ({len(shapes)} arrays of shapes {shapes})")
  model.set_weights(results.final_weights)
  return export_lib.export_model(
      model, data, os.fspath(path), config_hash=results.data_hash, quantize=quantize,
      representative_size=representative_size, integer_io=integer_io, verify=verify,
      given_in_python=given_in_python)


class RoundOutput(NamedTuple):
  """What ``Process.next`` returns, as TFF's ``LearningProcessOutput``."""
  state: 'ProcessState'
  metrics: dict  # The round's record, as results.json keeps it.


@dataclasses.dataclass(frozen=True)
class ProcessState:
  """A process's whole state after ``round_num`` rounds: the server state (the global
  model, optimiser state and the method's server decisions), every client's state
  (``ClientStateStore``, keyed by client id) and the rounds' records."""
  round_num: int
  server: object
  clients: object
  history: tuple


class Process:
  """A method as one process: ``initialize()``, then ``next(state, client_ids)``.

  Everything the method decides between rounds (FedEFC's switch to forward correction,
  FedLN's noise estimates, FedDS's Dawid-Skene weights, MaskedOptim's phases) happens
  inside ``next``; each client's state is kept in ``ProcessState.clients``. Built by
  ``build``.
  """

  def __init__(self, simulation):
    self._simulation = simulation
    self.config = simulation.config
    self.data = simulation.data

  def initialize(self) -> ProcessState:
    """The state before round 1; runs the method's one-off preparation (NNC's
    relabelling, LSC's embeddings), whose record is ``prepared``."""
    tff_runtime.use_in_this_thread()
    start = self._simulation.initial()
    self.prepared = self._simulation.prepare(start.store)
    return ProcessState(0, start.server, start.store.copy(), ())

  def next(self, state: ProcessState, client_ids: Optional[Sequence[str]] = None
           ) -> RoundOutput:
    """Trains one round on ``client_ids`` (None: the config's sample for this round);
    returns the new state and the round's record. ``state`` is left as it was."""
    simulation = self._check(state)
    if state.round_num >= self.config.fl.rounds:
      raise ValueError(f'state: round {state.round_num} is the last of the process (built '
                       f'with rounds={self.config.fl.rounds})')
    from tff_noisy.simulation.driver import RunState  # pylint: disable=import-outside-toplevel
    after, record = simulation.step(
        RunState(state.server, state.clients.copy(), tuple(state.history)), client_ids)
    return RoundOutput(ProcessState(state.round_num + 1, after.server, after.store,
                                    after.history), record)

  def model_weights(self, state: ProcessState) -> List[np.ndarray]:
    """The global model's weights in ``state``, in Keras ``get_weights()`` order."""
    return self._check(state).model_weights(state.server)

  def evaluate(self, state: ProcessState, x: np.ndarray, y: np.ndarray) -> dict:
    """Accuracy, macro-F1 and per-class accuracy of ``state``'s global model on (x, y)."""
    from tff_noisy.simulation import driver  # pylint: disable=import-outside-toplevel
    x = custom.inputs(x, 'x')
    y = custom.labels(y, 'y', self.data.num_classes)
    if x.shape[1:] != tuple(self.data.input_shape) or len(x) != len(y):
      raise ValueError(f'x, y: expected inputs [n, {", ".join(map(str, self.data.input_shape))}]'
                       f' and n labels, got {x.shape} and {len(y)}')
    self.model_weights(state)  # Into the evaluation model.
    return driver.evaluate(self._simulation.eval_model, x, y)

  def save(self, state: ProcessState, directory: str) -> None:
    """Checkpoints ``state`` into ``directory`` (``restore`` reads it back exactly)."""
    from tff_noisy.simulation import checkpoint  # pylint: disable=import-outside-toplevel
    self._check(state)
    checkpoint.save(directory, state.round_num, state.server, state.clients,
                    list(state.history), self._simulation.identity)

  def restore(self, directory: str) -> ProcessState:
    """The newest state ``save`` wrote into ``directory`` for this process's config, data
    and model (a ``CheckpointError`` names what differs)."""
    from tff_noisy.simulation import checkpoint  # pylint: disable=import-outside-toplevel
    tff_runtime.use_in_this_thread()
    simulation = self._simulation
    loaded = checkpoint.load(directory, simulation.process.initialize(),
                             simulation.identity, self.config.fl.rounds)
    if loaded is None:
      raise FileNotFoundError(f'directory: {directory} holds no checkpoint')
    if simulation.extra is None:
      self.prepared = simulation.prepare(simulation.initial().store)
    return ProcessState(loaded.round_num, loaded.state, loaded.store, tuple(loaded.history))

  def _check(self, state):
    tff_runtime.use_in_this_thread()
    if not isinstance(state, ProcessState):
      raise TypeError('state: expected the ProcessState that initialize() or next() returned, '
                      f'got {type(state).__name__}')
    if self._simulation.extra is None:
      raise ValueError('state: call initialize() (or restore) on this process first')
    return self._simulation


def build(method: str, *, model_fn: Callable, data: FederatedData, rounds: int,
          params: Union[None, dict, Params] = None, seed: int = 0,
          aggregator: str = 'mean', aggregator_params: Optional[dict] = None,
          noise: Optional[dict] = None, **fl: object) -> Process:
  """Method ``method`` as a ``Process`` on the user's model and federated data.

  Args:
    method: a registered method (``tff-noisy list methods``).
    model_fn: returns a new uncompiled ``tf.keras.Model`` whose output is its logits.
    data: ``federated_data(...)``: the clients ``next`` trains by id.
    rounds: how many rounds the process runs (schedules depend on it).
    params: the method's parameters, a mapping or its parameter class.
    seed: every random choice (sampling, shuffling, noise, initial model).
    aggregator, aggregator_params: the server rule (``tff_noisy.aggregators``).
    noise: label noise to put on ``data``'s labels first (``add_noise``'s ``noise``).
    **fl: the config's other ``fl`` fields: ``client_lr``, ``server_lr``,
      ``local_epochs``, ``batch_size``, ``client_optimizer``, ``client_runtime``, ...
  """
  spec = methods.METHODS.lookup(str(method))
  if isinstance(params, Params):
    expected = spec.params
    if type(params) is not expected:
      raise TypeError(f"params: method '{method}' takes {expected.__name__}, got "
                      f'{type(params).__name__}')
    params = dataclasses.asdict(params)
  elif params is not None and not isinstance(params, dict):
    raise TypeError(f'params: expected a mapping or a parameter class, got '
                    f'{type(params).__name__}')
  values = {'seed': seed, 'method': {'name': method, 'params': params or {}},
            'fl': {'rounds': rounds, 'aggregator': aggregator,
                   'aggregator_params': aggregator_params or {}, **fl}}
  if noise is not None:
    values['noise'] = noise
  from tff_noisy.simulation import driver  # pylint: disable=import-outside-toplevel
  tff_runtime.use_in_this_thread()
  if not isinstance(data, FederatedData):
    raise TypeError('data: expected tff_noisy.federated_data(...) or '
                    f'tff_noisy.federated_data_from_client_data(...), got {type(data).__name__}')
  if model_fn is None:
    raise TypeError('model_fn: expected a function returning a new tf.keras.Model, got None')
  config, choices = _checked_config(values, data, model_fn)
  return Process(driver.Simulation(config, choices=choices, data=data, model_fn=model_fn))
