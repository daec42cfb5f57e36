"""ExperimentConfig: one YAML file describes data, partition, noise, model, method and schedule.

Loading checks every key and type and names the closest valid key for a typo, and the
values of the fields defined here. The choices that other modules own (dataset, noise,
method and its parameters, aggregator) are checked by ``tff_noisy.validation``, which
sits above this module, all before any work starts. Errors are :class:`ConfigError`
and name the field, e.g. ``noise.rate``.
"""

import dataclasses
import hashlib
import json
import math
import typing
from typing import Any, Optional

from tff_noisy import extensions
from tff_noisy import files
from tff_noisy import registry
from tff_noisy import yamlio
from tff_noisy.device import DEVICES
from tff_noisy.errors import ConfigError  # pylint: disable=unused-import (re-exported)
from tff_noisy.errors import shorten, shown, warn
from tff_noisy.ops import faults as faults_lib
from tff_noisy.params import described, did_you_mean


@dataclasses.dataclass
class DataConfig:
  dataset: str = 'digits'
  data_dir: Optional[str] = described(None, 'IDX files; else $TFF_NOISY_DATA, then the Debian '
                                      'path.')
  num_classes: Optional[int] = described(None, "Optional check against the dataset's classes.")
  train_subset: Optional[int] = described(None, 'Class-balanced training subset size (None: all).')
  test_subset: Optional[int] = described(None, 'First N test examples (None: all).')
  public_fraction: float = described(0.0, 'Stratified public split on the server (FedDS, FOCUS).')
  cache_dir: Optional[str] = described(None, 'Default: $TFF_NOISY_CACHE or ~/.cache/tff-noisy.')


@dataclasses.dataclass
class PartitionConfig:
  name: str = described('iid', 'iid | iid_sigma | dirichlet | shards | fedcorr')
  num_clients: int = described(10, 'M: how many clients share the training set.')
  sigma: float = described(0.25, 'iid_sigma: relative std of client sizes.')
  alpha: float = described(0.5, 'dirichlet / fedcorr concentration.')
  min_size: int = described(10, 'dirichlet / fedcorr: resample until every client has this many.')
  shards_per_client: int = described(2, 'shards.')
  class_prob: float = described(0.7, 'fedcorr: probability that a client holds a class.')


@dataclasses.dataclass
class NoiseConfig:
  name: str = described('none', 'none | symmetric | pairflip | cifar10_asym | fedln | cleanlab | '
                        'fedcorr | linear | mixed | choice | real')
  rate: float = described(0.0, 'symmetric / pairflip / cifar10_asym: flip probability.')
  noisy_fraction: float = described(1.0, 'F: fraction of clients that are noisy.')
  level: float = described(0.0, 'fedln / cleanlab: n_l.')
  sparsity: float = described(0.0, 'fedln / cleanlab: n_s.')
  shared_matrix: bool = described(False, 'fedln / cleanlab: one matrix for all noisy clients '
                                  '(FedEFC).')
  matrix_seed: Optional[int] = described(None, "cleanlab: cleanlab's own seed (client m: +m); "
                                         'None: from seed.')
  valid_matrix: bool = described(False, "cleanlab: cleanlab's learnability check "
                                 '(valid_noise_matrix).')
  min_rate: float = described(0.0, 'linear / mixed: per-client rates linearly spaced in '
                              '[min_rate, max_rate].')
  max_rate: float = described(0.0, "linear / mixed: the last client's rate.")
  rates: Optional[list] = described(None, "choice: each client's rate drawn from this list "
                                    '(FedDS).')
  balanced: bool = described(True, 'choice: give each listed rate to the same number of clients.')
  flip: str = described('symmetric', 'linear / choice: symmetric | pairflip | cifar10_asym.')
  rho: float = described(0.0, 'fedcorr: fraction of noisy clients.')
  tau: float = described(0.0, "fedcorr: lower bound of a noisy client's rate (rate ~ U[tau, 1]).")
  real_labels: Optional[str] = described(None, 'real: cifar-N label column (e.g. worse_label).')


@dataclasses.dataclass
class ModelConfig:
  name: str = described('mlp', 'mlp | small_cnn | mnist_cnn | pooled_cnn | cnn9 | resnet20 | vgg9 '
                        '| resnet18 | resnet34 | audio')
  norm: Optional[str] = described(None, 'group | batch: resnet20 (default group), cnn9, vgg9, '
                                  'resnet18/34 (default batch).')
  width: Optional[int] = described(None, 'mlp hidden units (default 128).')

  def options(self) -> dict:
    """The model builder's keyword options that the config sets."""
    return {name: value for name, value in (('norm', self.norm), ('width', self.width))
            if value is not None}


@dataclasses.dataclass
class MethodConfig:
  name: str = 'fedavg'
  params: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class FLConfig:
  rounds: int = 10
  participation: float = described(1.0, 'Fraction q of clients per round, in (0, 1].')
  clients_per_round: Optional[int] = described(None, 'Overrides participation when set.')
  local_epochs: int = 1
  batch_size: int = 32
  client_optimizer: str = described('sgd', 'sgd | adam')
  client_lr: float = 0.05
  momentum: float = 0.0
  server_lr: float = 1.0
  eval_every: int = 1
  checkpoint_every: int = 5
  weight_decay: float = described(0.0, 'Coupled L2 on trainable weights: the gradient gains wd * '
                                  'w.')
  aggregator: str = described('mean', 'See tff_noisy/federated/aggregators/ (docs/methods.md).')
  aggregator_params: dict = described(text="The aggregator's.", default_factory=dict)
  client_runtime: str = described('auto', "Where clients train: auto (tf, or tff with "
                                  "--workers) | tff (TFF's worker) | tf (this process, GPU "
                                  'when seen, many clients per call) | tflite (the TFLite '
                                  'interpreter).')
  clients_per_call: Optional[int] = described(None, 'tf runtime: clients stacked in one graph '
                                              'call (None: as many as fit ~512 MB, at most 1024).')
  stack_clients: Optional[bool] = described(
      None, 'tf runtime: true stacks clients in one graph call where that is exact, false '
      'trains one call per client; None: stacked on a GPU, and on the CPU when the median '
      'client takes at most 50 steps a round and the model has no convolution '
      '(docs/guide.md: Client runtimes).')


@dataclasses.dataclass
class FaultsConfig:
  """Simulated faulty clients (docs/guide.md: Faulty clients); the defaults simulate none."""
  dropout: float = described(0.0, "Fraction of each round's sampled clients that never report.")
  byzantine: float = described(0.0, 'Fraction of all clients that are Byzantine (fixed, from '
                               'seed).')
  behaviour: str = described('scale', 'scale | sign_flip | gaussian | nan: what a Byzantine '
                             'client sends.')
  factor: float = described(100.0, 'scale: the update is multiplied by this.')
  std: float = described(1.0, 'gaussian: std of the noise sent in place of the update.')

  def active(self) -> bool:
    """True when any client can fail."""
    return self.dropout > 0 or self.byzantine > 0


@dataclasses.dataclass
class ExperimentConfig:
  imports: list = described(text='Modules imported first, which register methods (models, '
                            'aggregators) of your own: [my_pkg.methods] (docs/architecture.md).',
                            default_factory=list)
  seed: int = 0
  data: DataConfig = dataclasses.field(default_factory=DataConfig)
  partition: PartitionConfig = dataclasses.field(default_factory=PartitionConfig)
  noise: NoiseConfig = dataclasses.field(default_factory=NoiseConfig)
  model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
  method: MethodConfig = dataclasses.field(default_factory=MethodConfig)
  fl: FLConfig = dataclasses.field(default_factory=FLConfig)
  faults: FaultsConfig = dataclasses.field(default_factory=FaultsConfig)
  device: str = described('auto', 'auto | cpu | gpu: where TensorFlow runs (tff_noisy/device.py).')

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  def clients_per_round(self) -> int:
    """Clients sampled per round: fl.clients_per_round, else participation x clients."""
    if self.fl.clients_per_round is not None:
      return self.fl.clients_per_round
    return max(1, int(round(self.fl.participation * self.partition.num_clients)))

  def data_dict(self) -> dict:
    """The part of the config that determines the federated data (its cache key)."""
    data = dataclasses.asdict(self.data)
    data.pop('cache_dir')
    data.pop('data_dir')
    return {
        'seed': self.seed,
        'data': data,
        'partition': dataclasses.asdict(self.partition),
        'noise': {name: value for name, value in dataclasses.asdict(self.noise).items()
                  if not is_unset_addition(f'noise.{name}', value)},
    }

  def data_hash(self) -> str:
    """The data's cache key; a noise field added later counts only when it is set, so
    the builds (and checkpoints) made before it keep their key."""
    blob = json.dumps(self.data_dict(), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


# Where clients can train (fl.client_runtime), built by ``tff_noisy.runtime``;
# ``resolve_client_runtime`` makes 'auto' one of the others before a run.
AUTO_RUNTIME = 'auto'
CLIENT_RUNTIMES = registry.Registry('fl.client_runtime', 'client runtime', {
    AUTO_RUNTIME: registry.Entry('tf, or tff with --workers (the default)'),
    'tff': registry.Entry("Clients train in TFF's C++ worker_binary (CPU only); the one "
                          'runtime of --workers'),
    'tf': registry.Entry("Clients train in this process's TensorFlow (GPU when it sees one), "
                         'many clients per graph call where that is exact'),
    'tflite': registry.Entry('Clients train in the TFLite interpreter (the on-device model)'),
})

# fl.rounds at most: 100x the longest paper protocol (1,000 rounds); more is a typo.
MAX_ROUNDS = 100_000

# Fields added after data was cached and checkpoints were written, with the value their
# absence means in those files (the default then): at that value they are left out of the
# data's cache key and of checkpoint identities, so those stay valid. (fl.client_runtime
# defaults to auto now; a checkpoint without it ran on tff.)
ADDED_FIELDS = {'noise.matrix_seed': None, 'noise.valid_matrix': False,
                **{f'faults.{f.name}': f.default for f in dataclasses.fields(FaultsConfig)},
                'fl.client_runtime': 'tff', 'fl.clients_per_call': None,
                'fl.stack_clients': None}


def is_unset_addition(dotted_name: str, value: Any) -> bool:
  """True for a field of ``ADDED_FIELDS`` that still has its default value."""
  return dotted_name in ADDED_FIELDS and value == ADDED_FIELDS[dotted_name]


def _type_ok(value: Any, annotation: Any) -> Any:
  """Returns the value coerced to the annotation, or raises TypeError."""
  origin = typing.get_origin(annotation)
  if origin is typing.Union:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if value is None:
      return None
    return _type_ok(value, args[0])
  if annotation is float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      raise TypeError('a number')
    return float(value)
  if annotation is int:
    if isinstance(value, float) and value.is_integer():
      return int(value)  # 1e6, as people write large counts.
    if isinstance(value, bool) or not isinstance(value, int):
      raise TypeError('an integer')
    return value
  if annotation is bool:
    if not isinstance(value, bool):
      raise TypeError('true or false')
    return value
  if annotation is str:
    if not isinstance(value, str):
      raise TypeError('a string')
    return value
  if annotation is list:
    if not isinstance(value, (list, tuple)):
      raise TypeError('a list')
    return list(value)
  if annotation is dict:
    if not isinstance(value, dict):
      raise TypeError('a mapping')
    return dict(value)
  return value


def _build(cls, values: Any, path: str):
  if not isinstance(values, dict):
    raise ConfigError(f'{path or "config"}: expected a mapping, got {shown(values)}')
  fields = {f.name: f for f in dataclasses.fields(cls)}
  hints = typing.get_type_hints(cls)
  kwargs = {}
  for key, value in values.items():
    name = f'{path}.{key}' if path else str(key)
    if key not in fields:
      raise ConfigError(f"unknown config key '{shorten(name, 80)}'"
                        f"{did_you_mean(key, fields)} Allowed here: {', '.join(fields)}")
    annotation = hints[key]
    if dataclasses.is_dataclass(annotation):
      kwargs[key] = _build(annotation, value, name)
      continue
    try:
      kwargs[key] = _type_ok(value, annotation)
    except TypeError as e:
      raise ConfigError(f'{name}: expected {e.args[0]}, got {shown(value)}') from None
  return cls(**kwargs)


def parse(values: dict) -> ExperimentConfig:
  """A config from nested dicts, its keys and types checked, its values not yet."""
  return _build(ExperimentConfig, values or {}, '')


def from_dict(values: dict) -> ExperimentConfig:
  """Builds and validates a config from nested dicts, then imports the modules its
  ``imports`` names (their methods, models and aggregators can then be named)."""
  config = parse(values)
  validate(config)
  extensions.import_modules(config.imports)
  return config


def apply_overrides(values: dict, overrides: list) -> dict:
  """Applies ``key.sub=value`` strings (values parsed as YAML, see yamlio) to nested dicts."""
  for item in overrides or ():
    if '=' not in item:
      raise ConfigError(f'--set {shown(item)}: expected key=value, e.g. fl.rounds=20')
    key, raw = item.split('=', 1)
    target = values
    parts = key.strip().split('.')
    for part in parts[:-1]:
      target = target.setdefault(part, {})
      if not isinstance(target, dict):
        raise ConfigError(f'--set {shorten(key, 80)}: {shorten(part, 80)} is not a section')
    try:
      target[parts[-1]] = yamlio.load(raw)
    except yamlio.YamlError as e:
      raise ConfigError(f'--set {shorten(item, 80)}: {e}') from None
  return values


def load(path: str, overrides: Optional[list] = None, imports: tuple = (),
         validated: bool = True) -> ExperimentConfig:
  """Loads a YAML config file, applies ``--set`` overrides, adds the modules of
  ``imports`` (``--import``) after its own ``imports`` and validates it (with
  ``validated=False`` only its keys and types: see :func:`parse`)."""
  try:
    with files.open_regular(path, 'r') as f:
      values = yamlio.load(f)
  except FileNotFoundError:
    raise ConfigError(f'config file not found: {path}') from None
  except IsADirectoryError:
    raise ConfigError(f'config file {path} is a directory; give a YAML file') from None
  except files.NotRegularFile as e:
    raise ConfigError(f'config file {e}') from None
  except OSError as e:
    raise ConfigError(f'config file {path}: {e.strerror}') from None
  except UnicodeDecodeError:
    raise ConfigError(f'config file {path}: not a UTF-8 text file') from None
  except yamlio.YamlError as e:
    raise ConfigError(f'config file {path}: {e}') from None
  if values is None:
    values = {}
  if not isinstance(values, dict):
    raise ConfigError(f'config file {path}: expected a mapping of sections (seed, data, '
                      f'fl, ...), got a {type(values).__name__}')
  if not values:
    warn(f'config file {path} sets nothing: every field takes its default (digits, no '
         'noise, fedavg, 10 rounds; `tff-noisy list config` shows them all)')
  values = apply_overrides(values, overrides)
  if imports and isinstance(values.get('imports', []), list):  # Else from_dict says why.
    own = values.get('imports', [])
    values['imports'] = own + [name for name in imports if name not in own]
  return (from_dict if validated else parse)(values)


def _require(condition: bool, field: str, message: str):
  if not condition:
    raise ConfigError(f'{field}: {message}')


def _check_gpu_runtime(device: str, runtime: str) -> None:
  _require(not (device == 'gpu' and runtime == 'tff'), 'device',
           "gpu, but fl.client_runtime: tff trains clients in TFF's worker, which has no "
           'CUDA; set fl.client_runtime: tf to train them on the GPU')


def resolve_client_runtime(config: ExperimentConfig,
                           on_workers: bool = False) -> ExperimentConfig:
  """``config`` with ``fl.client_runtime: auto`` made concrete: ``tff`` when the run's
  computations go to TFF workers (``--workers``), else ``tf``; a concrete runtime is kept.

  Raises ConfigError for a runtime that cannot run there: ``--workers`` with ``tf`` or
  ``tflite`` (their clients train in this process), ``device: gpu`` with ``tff``.
  """
  runtime = config.fl.client_runtime
  if runtime == AUTO_RUNTIME:
    runtime = 'tff' if on_workers else 'tf'
  if on_workers and runtime != 'tff':
    where = {'tflite': "this machine's TFLite interpreter",
             'tf': "this process's TensorFlow"}[runtime]
    raise ConfigError(f'--workers: with fl.client_runtime: {runtime} the clients train in '
                      f'{where}, not on TFF workers; use fl.client_runtime: tff (or auto) '
                      'with --workers, or no --workers')
  _check_gpu_runtime(config.device, runtime)
  if runtime == config.fl.client_runtime:
    return config
  return dataclasses.replace(config, fl=dataclasses.replace(config.fl, client_runtime=runtime))


def validate(config: ExperimentConfig) -> None:
  """Checks values that need no data; the data layer checks the rest before building."""
  extensions.check_names(config.imports)
  _require(0 <= config.seed < 2**32, 'seed',
           f'must be an integer in [0, 2**32 - 1], got {config.seed}')
  _require(config.device in DEVICES, 'device',
           f"must be one of {', '.join(DEVICES)}; got {config.device!r}")
  fl = config.fl
  _require(1 <= fl.rounds <= MAX_ROUNDS, 'fl.rounds',
           f'must be in [1, {MAX_ROUNDS:,}] (the papers run up to 1,000; every round '
           f'stays in the run\'s history and checkpoints), got {fl.rounds:,}')
  _require(0.0 < fl.participation <= 1.0, 'fl.participation',
           f'must be in (0, 1], got {fl.participation}')
  if fl.clients_per_round is not None:
    _require(1 <= fl.clients_per_round <= config.partition.num_clients,
             'fl.clients_per_round',
             f'must be in [1, partition.num_clients={config.partition.num_clients}], '
             f'got {fl.clients_per_round}')
  _require(fl.local_epochs >= 1, 'fl.local_epochs', f'must be >= 1, got {fl.local_epochs}')
  _require(fl.batch_size >= 1, 'fl.batch_size', f'must be >= 1, got {fl.batch_size}')
  _require(fl.client_optimizer in ('sgd', 'adam'), 'fl.client_optimizer',
           f"must be one of sgd, adam; got '{fl.client_optimizer}'")
  _require(0 < fl.client_lr < math.inf, 'fl.client_lr',
           f'must be a finite number > 0, got {fl.client_lr}')
  _require(0.0 <= fl.momentum < 1.0, 'fl.momentum', f'must be in [0, 1), got {fl.momentum}')
  _require(0 < fl.server_lr < math.inf, 'fl.server_lr',
           f'must be a finite number > 0, got {fl.server_lr}')
  _require(fl.eval_every >= 1, 'fl.eval_every', f'must be >= 1, got {fl.eval_every}')
  _require(fl.checkpoint_every >= 1, 'fl.checkpoint_every',
           f'must be >= 1, got {fl.checkpoint_every}')
  _require(0 <= fl.weight_decay < math.inf, 'fl.weight_decay',
           f'must be a finite number >= 0, got {fl.weight_decay}')
  CLIENT_RUNTIMES.lookup(fl.client_runtime)
  _check_gpu_runtime(config.device, fl.client_runtime)
  if fl.clients_per_call is not None:
    _require(fl.clients_per_call >= 1, 'fl.clients_per_call',
             f'must be >= 1 (or unset: automatic), got {fl.clients_per_call}')
  faults = config.faults
  _require(0.0 <= faults.dropout < 1.0, 'faults.dropout',
           f'must be in [0, 1), got {faults.dropout}')
  _require(0.0 <= faults.byzantine <= 1.0, 'faults.byzantine',
           f'must be in [0, 1], got {faults.byzantine}')
  faults_lib.BEHAVIOURS.lookup(faults.behaviour)
  _require(math.isfinite(faults.factor), 'faults.factor',
           f'must be a finite number, got {faults.factor}')
  _require(faults.std >= 0 and math.isfinite(faults.std), 'faults.std',
           f'must be a finite number >= 0, got {faults.std}')
  _require(not (faults.active() and fl.client_runtime == 'tflite'), 'faults',
           'simulated faults run in the TFF client work; they are not available with '
           'fl.client_runtime: tflite (use tff)')
  per_round = config.clients_per_round()
  if faults.dropout:  # At least one sampled client must report.
    _require(per_round > 1, 'faults.dropout',
             f'{faults.dropout} of the 1 client sampled per round drops it every round or '
             'never; use 0, or sample more clients')
    _require(faults_lib.count(faults.dropout, per_round) < per_round, 'faults.dropout',
             f'{faults.dropout} of {per_round} (the clients sampled per round) drops all '
             f'{per_round}, so no round trains; use less than {1 - 0.5 / per_round:.3g}')
  for field, fraction, num, of in (
      ('dropout', faults.dropout, per_round, 'the clients sampled per round'),
      ('byzantine', faults.byzantine, config.partition.num_clients, 'partition.num_clients')):
    if fraction and num > 0:  # num < 1 is partition's or fl's own error.
      _require(faults_lib.count(fraction, num) > 0, f'faults.{field}',
               f'{fraction} of {num} ({of}) rounds to no client; use 0 or at least '
               f'{0.5 / num:.3g}')
