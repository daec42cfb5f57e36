"""The federated build: one config and seed give byte-identical client data, cached.

Order: load source -> class-balanced ``train_subset`` -> first ``test_subset`` test
examples -> stratified public split -> partition -> per-client noise. The
result is saved with ``np.savez`` (no pickle) under ``<cache>/<config.data_hash()>/``,
where <cache> is ``data.cache_dir``, else ``$TFF_NOISY_CACHE``, else
``~/.cache/tff-noisy``, and the SHA-256 of its arrays is written after it. The next build
with the same data config loads it if its arrays match that checksum, and otherwise
rebuilds it (with a warning).
"""

import dataclasses
import hashlib
import json
import os
from typing import Optional
import zipfile

import numpy as np

from tff_noisy import files
from tff_noisy.config import ConfigError, ExperimentConfig
from tff_noisy.data import noise as noise_lib
from tff_noisy.data import params as data_params
from tff_noisy.data import partition as partition_lib
from tff_noisy.data import sources
from tff_noisy.errors import warn

CACHE_ENV = sources.CACHE_ENV
CUSTOM = 'custom'  # data.dataset of federated data from Python (``data.custom``).
CACHE_FILE = 'data-v1.npz'  # Bump the version whenever the build's output changes.
CHECKSUM_FILE = CACHE_FILE + '.sha256'  # Written last: marks a complete cache entry.
_SUBSET, _PUBLIC = 5, 6  # Random streams (see partition.generator).


@dataclasses.dataclass
class FederatedData:
  """Client data of one build; per-client dicts are keyed by client id, in client order.

  ``y_true``, ``noise_rates`` and ``transition_matrices`` are simulation truth, for
  evaluation only: never pass them to a method. They are None for data from the user
  whose truth is unknown (``data.custom``). ``x_public`` is the server's public split;
  ``y_public`` its labels, clean (the dataset's own), which only a method that assumes a
  clean labelled server set reads (``MethodSpec.needs_public_labels``: FOCUS); FedDS's
  public set is unlabelled.
  """
  dataset_name: str
  num_classes: int
  input_shape: tuple
  class_names: list
  config_hash: str
  client_ids: list  # 'client_000', ...
  x: dict  # client id -> inputs [N_m, *input_shape] float32
  y: dict  # client id -> observed (noisy) labels [N_m] int64
  y_true: Optional[dict]  # client id -> true labels [N_m] int64
  noise_rates: Optional[np.ndarray]  # [M] realised fraction of y != y_true, in client order.
  transition_matrices: Optional[np.ndarray]  # [M, C, C] empirical, noise.transition_matrix.
  x_test: np.ndarray
  y_test: np.ndarray
  x_public: Optional[np.ndarray] = None  # The server's public split (data.public_fraction).
  y_public: Optional[np.ndarray] = None  # Its clean labels (see above).

  def client(self, cid: str) -> tuple:
    """Returns a client's (inputs, observed labels)."""
    return self.x[cid], self.y[cid]


def _require(condition: bool, field: str, message: str):
  if not condition:
    raise ConfigError(f'{field}: {message}')


def validate_config(config: ExperimentConfig, custom: Optional[FederatedData] = None) -> None:
  """Checks the data section, then the partition's and the noise model's parameters
  (``data.params.resolve``), without touching any data.

  ``custom``: the user's own data for ``data.dataset: custom`` (``data.custom``).
  """
  data, part, noise = config.data, config.partition, config.noise
  if data.dataset == CUSTOM or custom is not None:
    _validate_custom(config, custom)
    return
  spec = sources.DATASETS.lookup(data.dataset)
  if data.num_classes is not None:
    _require(data.num_classes == spec.num_classes, 'data.num_classes',
             f'{data.dataset} has {spec.num_classes} classes, got {data.num_classes}')
  for field in ('train_subset', 'test_subset'):
    value = getattr(data, field)
    _require(value is None or value >= 1, f'data.{field}', f'must be >= 1, got {value}')
  _require(0.0 <= data.public_fraction < 1.0, 'data.public_fraction',
           f'must be in [0, 1), got {data.public_fraction}')

  split = partition_lib.PARTITIONS.lookup(part.name)
  noise_model = noise_lib.NOISE_MODELS.lookup(noise.name)
  context = data_params.Context(
      data.dataset, spec.num_classes, tuple(spec.noisy_label_columns),
      tuple(name for name, s in sources.DATASETS.items() if s.noisy_label_columns))
  data_params.resolve(split.params, part, context)
  data_params.resolve(noise_model.params, noise, context)


def _validate_custom(config: ExperimentConfig, custom: Optional[FederatedData]) -> None:
  """``data.dataset: custom`` with the user's data: the config's data and partition
  sections describe a registered dataset's build, so only their defaults fit."""
  if config.data.dataset != CUSTOM:
    raise ConfigError(f"data.dataset: '{config.data.dataset}', but data came from Python; "
                      f"set data.dataset: {CUSTOM} to train on it")
  if custom is None:
    raise ConfigError(f'data.dataset: {CUSTOM} takes its federated data from Python: '
                      'tff_noisy.run(config, data=tff_noisy.federated_data(...))')
  if not isinstance(custom, FederatedData):
    raise TypeError('data: expected federated data from tff_noisy.federated_data(...) or '
                    f'tff_noisy.federated_data_from_client_data(...), got '
                    f'{type(custom).__name__}')
  defaults = ExperimentConfig()
  for section, names in (('data', ('train_subset', 'test_subset', 'public_fraction',
                                   'data_dir', 'num_classes')),
                         ('partition', ('name',))):
    for name in names:
      value = getattr(getattr(config, section), name)
      if value != getattr(getattr(defaults, section), name):
        raise ConfigError(f'{section}.{name}: not used with data.dataset: {CUSTOM} (the '
                          'clients, their split and the public set are the data you pass); '
                          f'leave it unset, got {value!r}')
  if config.partition.num_clients != len(custom.client_ids):
    raise ConfigError(f'partition.num_clients: the data has {len(custom.client_ids)} '
                      f'clients, got {config.partition.num_clients}')
  context = data_params.Context(CUSTOM, custom.num_classes, (), ())
  data_params.resolve(noise_lib.NOISE_MODELS.lookup(config.noise.name).params, config.noise,
                      context)


def cache_dir(config: ExperimentConfig) -> str:
  """The directory that holds (or will hold) this config's build."""
  return os.path.join(config.data.cache_dir or sources.cache_root(), config.data_hash())


def build_federated_data(config: ExperimentConfig, checked: bool = False) -> FederatedData:
  """Builds the federated data of a config, or loads it from the cache.

  Raises ConfigError naming the cache setting if the cache cannot be written (checked
  before the build). ``checked``: ``validate_config`` has passed already.
  """
  if not checked:
    validate_config(config)
  directory = cache_dir(config)
  arrays = _read_cache(directory)
  if arrays is None:
    _check_writable(config, directory)
    arrays = _build_arrays(config)
    try:
      os.makedirs(directory, exist_ok=True)
      files.write_atomically(os.path.join(directory, CACHE_FILE), files.npz_bytes(**arrays))
      files.write_atomically(os.path.join(directory, CHECKSUM_FILE),
                             _digest(arrays).encode())
    except OSError as e:
      raise _cache_error(config, e.strerror) from None
  return _from_arrays(arrays)


def _read_cache(directory: str) -> Optional[dict]:
  """The cached arrays, or None if there are none or they are corrupt (with a warning)."""
  path = os.path.join(directory, CACHE_FILE)
  if not os.path.exists(path):
    return None
  try:
    with open(os.path.join(directory, CHECKSUM_FILE)) as f:
      expected = f.read().strip()
    with np.load(path, allow_pickle=False) as f:
      arrays = {key: f[key] for key in f.files}
    problem = None if _digest(arrays) == expected else f'does not match {CHECKSUM_FILE}'
  except FileNotFoundError:
    problem = f'has no {CHECKSUM_FILE} (its build did not finish, or predates checksums)'
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    problem = f'cannot be read: {e}'
  if problem is None:
    return arrays
  warn(f'data cache {path} {problem}; rebuilding it')
  return None


def _digest(arrays: dict) -> str:
  """SHA-256 of the arrays' names, dtypes, shapes and bytes: equal for equal builds."""
  digest = hashlib.sha256()
  for key in sorted(arrays):
    array = arrays[key]
    digest.update(json.dumps([key, array.dtype.str, array.shape]).encode())
    digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
  return digest.hexdigest()


def _check_writable(config: ExperimentConfig, directory: str) -> None:
  """Raises the cache error before a build whose result could not be cached."""
  existing = os.path.abspath(directory)
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise _cache_error(config, f'{existing} is not a directory')
  if not os.access(existing, os.W_OK | os.X_OK):
    raise _cache_error(config, f'{existing} is not writable')


def _cache_error(config: ExperimentConfig, reason: str) -> ConfigError:
  """The error for a cache that cannot be written, naming the setting that chose it."""
  if config.data.cache_dir:
    field = 'data.cache_dir'
  elif os.environ.get(CACHE_ENV):
    field = f'${CACHE_ENV}'
  else:
    field = f'data.cache_dir (unset: ${CACHE_ENV}, else ~/.cache/tff-noisy)'
  return ConfigError(f'{field}: cannot write the data cache {cache_dir(config)}: {reason}')


def _sample_per_class(labels: np.ndarray, counts: np.ndarray, rng) -> np.ndarray:
  """Sorted positions of counts[c] random samples of each class c."""
  chosen = [rng.choice(np.flatnonzero(labels == c), size=n, replace=False)
            for c, n in enumerate(counts)]
  return np.sort(np.concatenate(chosen)).astype(np.int64)


def class_balanced_subset(labels: np.ndarray, size: int, num_classes: int, seed: int,
                          name: str = 'dataset') -> np.ndarray:
  """Sorted positions of the build's seeded class-balanced subset of ``size`` samples.

  size // C samples of each class, one more of size % C random classes; the random
  stream is the build's, so it selects the samples of ``data.train_subset`` with this
  seed. Raises ValueError if a class is too small.
  """
  rng = partition_lib.generator(seed, _SUBSET)
  counts = np.full(num_classes, size // num_classes)
  counts[rng.choice(num_classes, size % num_classes, replace=False)] += 1
  class_sizes = np.bincount(labels, minlength=num_classes)
  if (counts > class_sizes).any():
    raise ValueError(f'a class-balanced subset of {size} needs {counts.max()} samples per '
                     f'class; the smallest {name} class has {class_sizes.min()}')
  return _sample_per_class(labels, counts, rng)


def _build_arrays(config: ExperimentConfig) -> dict:
  """Runs the build; returns the flat arrays that are cached (see _from_arrays)."""
  data, seed = config.data, config.seed
  dataset = sources.load_dataset(data.dataset, data.data_dir)
  num_classes = dataset.num_classes

  pool = np.arange(len(dataset.y_train))
  if data.train_subset is not None:
    try:
      pool = class_balanced_subset(dataset.y_train, data.train_subset, num_classes, seed,
                                   data.dataset)
    except ValueError as e:
      raise ConfigError(f'data.train_subset: {e}') from e

  x_test, y_test = dataset.x_test, dataset.y_test
  if data.test_subset is not None:
    _require(data.test_subset <= len(y_test), 'data.test_subset',
             f'{data.dataset} has {len(y_test)} test examples, got {data.test_subset}')
    x_test, y_test = x_test[:data.test_subset], y_test[:data.test_subset]

  arrays = {}
  if data.public_fraction > 0:
    labels = dataset.y_train[pool]
    counts = np.floor(data.public_fraction * np.bincount(labels, minlength=num_classes)
                      + 0.5).astype(np.int64)
    public = _sample_per_class(labels, counts, partition_lib.generator(seed, _PUBLIC))
    arrays['x_public'] = dataset.x_train[pool[public]]
    arrays['y_public_true'] = dataset.y_train[pool[public]]  # The cache's name of y_public.
    pool = np.delete(pool, public)

  parts = partition_lib.partition(dataset.y_train[pool], config.partition, seed)
  indices = [pool[p] for p in parts]
  y_true = [dataset.y_train[i] for i in indices]
  real = None
  if config.noise.name == 'real':
    column = dataset.y_train_noisy[config.noise.real_labels]
    real = [column[i] for i in indices]
  y_obs = noise_lib.apply_noise(y_true, num_classes, config.noise, seed, real)

  order = np.concatenate(indices)
  meta = {
      'dataset_name': dataset.name,
      'num_classes': num_classes,
      'input_shape': list(dataset.input_shape),
      'class_names': list(dataset.class_names),
      'config_hash': config.data_hash(),
      'data_config': config.data_dict(),
  }
  arrays.update(
      meta=np.array(json.dumps(meta, sort_keys=True)),
      client_sizes=np.array([len(i) for i in indices], np.int64),
      x=dataset.x_train[order],
      y=np.concatenate(y_obs),
      y_true=dataset.y_train[order],
      noise_rates=np.array([np.mean(o != t) for o, t in zip(y_obs, y_true)]),
      transition_matrices=np.stack([noise_lib.transition_matrix(t, o, num_classes)
                                    for o, t in zip(y_obs, y_true)]),
      x_test=x_test,
      y_test=y_test,
  )
  return arrays


def _from_arrays(arrays: dict) -> FederatedData:
  """FederatedData whose per-client arrays are views of the flat cached arrays."""
  meta = json.loads(str(arrays['meta']))
  sizes = arrays['client_sizes']
  width = max(3, len(str(len(sizes) - 1)))
  client_ids = [f'client_{m:0{width}d}' for m in range(len(sizes))]
  cuts = np.cumsum(sizes)[:-1]

  def per_client(key):
    return dict(zip(client_ids, np.split(arrays[key], cuts)))

  return FederatedData(
      dataset_name=meta['dataset_name'],
      num_classes=meta['num_classes'],
      input_shape=tuple(meta['input_shape']),
      class_names=meta['class_names'],
      config_hash=meta['config_hash'],
      client_ids=client_ids,
      x=per_client('x'),
      y=per_client('y'),
      y_true=per_client('y_true'),
      noise_rates=arrays['noise_rates'],
      transition_matrices=arrays['transition_matrices'],
      x_test=arrays['x_test'],
      y_test=arrays['y_test'],
      x_public=arrays.get('x_public'),
      y_public=arrays.get('y_public_true'),
  )


def format_client_table(fd: FederatedData) -> str:
  """A per-client table: id, size, classes present (true labels), true noise rate."""
  width = max(len(c) for c in fd.client_ids + ['client', 'total'])
  sizes = np.array([len(fd.y[c]) for c in fd.client_ids])
  public = 0 if fd.x_public is None else len(fd.x_public)
  lines = [f'{fd.dataset_name} [{fd.config_hash}]: {len(sizes)} clients, '
           f'{fd.num_classes} classes, {public} public, {len(fd.y_test)} test',
           f'{"client":<{width}}  {"size":>7}  {"classes":>7}  {"noise":>6}']
  for cid, size, rate in zip(fd.client_ids, sizes, fd.noise_rates):
    classes = len(np.unique(fd.y_true[cid]))
    lines.append(f'{cid:<{width}}  {size:>7}  {classes:>7}  {rate:>6.3f}')
  all_classes = len(np.unique(np.concatenate(list(fd.y_true.values()))))
  overall = float(np.dot(sizes, fd.noise_rates) / sizes.sum())
  lines.append(f'{"total":<{width}}  {sizes.sum():>7}  {all_classes:>7}  {overall:>6.3f}')
  lines.append(f'noisy clients: {int((fd.noise_rates > 0).sum())}/{len(sizes)}; sizes '
               f'{sizes.min()}..{sizes.max()} (mean {sizes.mean():.1f})')
  return '\n'.join(lines)


def format_transition_matrix(fd: FederatedData) -> str:
  """The realised transition matrix pooled over every client's training labels:
  T[true c, observed k] = share of class c's examples labelled k (rows sum to 1)."""
  y_true = np.concatenate([fd.y_true[c] for c in fd.client_ids])
  y_obs = np.concatenate([fd.y[c] for c in fd.client_ids])
  matrix = noise_lib.transition_matrix(y_true, y_obs, fd.num_classes)
  names = [str(n)[:10] for n in fd.class_names]
  corner = 'true / observed'
  width = max(len(n) + 2 for n in names + [corner])
  lines = ['realised label transitions over all clients (row: true class, column: observed '
           'label, rows sum to 1)',
           f'{corner:<{width}}' + ''.join(f'{i:>6}' for i in range(len(names)))]
  for i, (name, row) in enumerate(zip(names, matrix)):
    lines.append(f'{f"{i} {name}":<{width}}' + ''.join(f'{v:>6.2f}' for v in row))
  return '\n'.join(lines)

