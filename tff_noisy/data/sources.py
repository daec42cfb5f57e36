"""Named datasets as numpy arrays: train/test splits plus class metadata.

Images are float32 in [0, 1] with shape (N, H, W, C); audio is float32 in [-1, 1] with
shape (N, 16000); labels are int64. Sources, tried in this order:

* ``digits``: scikit-learn's bundled 8x8 digits, always offline.
* ``mnist`` / ``fashion_mnist``: IDX files (``train-images-idx3-ubyte.gz`` etc., gzipped
  or not) in ``data_dir``, then ``$TFF_NOISY_DATA``, each as ``DIR/<name>`` or ``DIR``
  itself, then the Debian package's directory (``dataset-fashion-mnist``); then TFDS.
* ``keywords``: ten spoken words synthesised offline with espeak-ng
  (:mod:`tff_noisy.data.keywords`): ``keywords-v1.npz`` in ``data_dir`` or
  ``$TFF_NOISY_DATA`` (as ``DIR/keywords`` or ``DIR``), then in ``<cache>/keywords``
  (``$TFF_NOISY_CACHE``, default ``~/.cache/tff-noisy``), where it is generated on first
  use if espeak-ng is installed.
* every other dataset but ``digits``: an already prepared TFDS dataset under
  ``data_dir``, ``$TFF_NOISY_DATA`` or the TFDS default directory. Nothing is ever
  downloaded.

A dataset found nowhere raises :class:`DatasetNotFoundError`, which lists every place
tried and how to provide the data; there is no fallback to another dataset. A
``data_dir`` that is not a directory is a :class:`DatasetError` of its own.
"""

import dataclasses
import gzip
import os
import sys
from typing import Mapping, Optional

import numpy as np

from tff_noisy import registry
from tff_noisy.data import audio

DATA_ENV = 'TFF_NOISY_DATA'
CACHE_ENV = 'TFF_NOISY_CACHE'
# name -> (Debian package, directory of its IDX files).
DEBIAN_PACKAGES = {
    'fashion_mnist': ('dataset-fashion-mnist', '/usr/share/datasets/fashion-mnist'),
}
AUDIO_SAMPLES = audio.CLIP_SAMPLES  # speech_commands: 1 s at 16 kHz.

_IDX_FILES = {
    'x_train': 'train-images-idx3-ubyte',
    'y_train': 'train-labels-idx1-ubyte',
    'x_test': 't10k-images-idx3-ubyte',
    'y_test': 't10k-labels-idx1-ubyte',
}
_IDX_CLASS_NAMES = {
    'mnist': tuple(str(d) for d in range(10)),
    'fashion_mnist': ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal',
                      'Shirt', 'Sneaker', 'Bag', 'Ankle boot'),
}
_CIFAR10N_COLUMNS = ('aggre_label', 'worse_label', 'random_label1', 'random_label2',
                     'random_label3')


class DatasetError(RuntimeError):
  """A dataset cannot be loaded."""


class DatasetNotFoundError(DatasetError):
  """A dataset is in none of the places searched."""


@dataclasses.dataclass(frozen=True)
class DatasetSpec(registry.Entry):
  """What is known about a dataset without loading it (its summary: what it is and where
  it comes from); it takes no parameters and ``load_dataset`` builds it."""
  # Every dataset gives both (a field after an entry's defaults needs a default).
  num_classes: int = 0
  input_shape: tuple = ()
  # Real noisy-label columns: our name -> TFDS feature (CIFAR-N, training split only).
  noisy_label_columns: Mapping[str, str] = dataclasses.field(default_factory=dict)

  def listing(self) -> str:
    shape = 'x'.join(str(d) for d in self.input_shape)
    columns = (f"; noise.real_labels: {', '.join(self.noisy_label_columns)}"
               if self.noisy_label_columns else '')
    return f'{self.num_classes} classes, input {shape}: {self.summary}{columns}'


_TFDS = 'a prepared TFDS directory'
DATASETS = registry.Registry('data.dataset', 'dataset', {
    'digits': DatasetSpec("scikit-learn's bundled 8x8 digits; always offline",
                          num_classes=10, input_shape=(8, 8, 1)),
    'mnist': DatasetSpec(f'MNIST from IDX files (data.data_dir, ${DATA_ENV}) or {_TFDS}',
                         num_classes=10, input_shape=(28, 28, 1)),
    'fashion_mnist': DatasetSpec(
        f'Fashion-MNIST from IDX files (data.data_dir, ${DATA_ENV}, the Debian package '
        f'dataset-fashion-mnist) or {_TFDS}', num_classes=10, input_shape=(28, 28, 1)),
    'cifar10': DatasetSpec(f'CIFAR-10 from {_TFDS}', num_classes=10, input_shape=(32, 32, 3)),
    'cifar100': DatasetSpec(f'CIFAR-100 from {_TFDS}', num_classes=100,
                            input_shape=(32, 32, 3)),
    'cifar10_n': DatasetSpec(f"CIFAR-10 with CIFAR-10N's human noisy labels (noise: real) "
                             f'from {_TFDS}', num_classes=10, input_shape=(32, 32, 3),
                             noisy_label_columns={c: c for c in _CIFAR10N_COLUMNS}),
    'cifar100_n': DatasetSpec(f"CIFAR-100 with CIFAR-100N's human noisy labels (noise: "
                              f'real) from {_TFDS}', num_classes=100, input_shape=(32, 32, 3),
                              noisy_label_columns={'noisy_fine': 'noise_label'}),
    'speech_commands': DatasetSpec(f'Speech Commands, 1 s of 16 kHz audio, from {_TFDS}',
                                   num_classes=12, input_shape=(AUDIO_SAMPLES,)),
    'keywords': DatasetSpec('Ten Speech Commands words synthesised offline with espeak-ng '
                            '(generated on first use)', num_classes=10,
                            input_shape=(AUDIO_SAMPLES,)),
}, DatasetSpec)


@dataclasses.dataclass
class Dataset:
  """One dataset's train/test arrays and metadata."""
  name: str
  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int
  input_shape: tuple
  class_names: list
  # Real noisy labels of the training split, column -> int64[N] (CIFAR-N only).
  y_train_noisy: dict = dataclasses.field(default_factory=dict)


def cache_root() -> str:
  """``$TFF_NOISY_CACHE``, else ``~/.cache/tff-noisy``."""
  return os.environ.get(CACHE_ENV) or os.path.expanduser('~/.cache/tff-noisy')


def load_dataset(name: str, data_dir: Optional[str] = None) -> Dataset:
  """Loads a named dataset; raises DatasetNotFoundError if it is nowhere to be found (a
  ConfigError naming data.dataset if ``DATASETS`` has no ``name``)."""
  DATASETS.lookup(name)
  if name == 'digits':
    return _load_digits()
  if data_dir and not os.path.isdir(data_dir):
    raise DatasetError(f'data.data_dir: no such directory: {data_dir}')
  tried, roots = [], []
  for root, origin in ((data_dir, 'data.data_dir'),
                       (os.environ.get(DATA_ENV), f'${DATA_ENV}')):
    if root:
      roots.append((root, origin))
    else:
      tried.append(f'{origin}: not set')
  candidates = [(d, o) for root, o in roots for d in (os.path.join(root, name), root)]
  if name == 'keywords':
    return _load_keywords(candidates, tried)
  if name in _IDX_CLASS_NAMES:
    if name in DEBIAN_PACKAGES:
      package, directory = DEBIAN_PACKAGES[name]
      candidates.append((directory, f'Debian package {package}'))
    for directory, origin in candidates:
      paths = _idx_paths(directory, origin, tried)
      if paths:
        return _from_idx(name, paths)
  tfds_default = os.environ.get('TFDS_DATA_DIR') or os.path.expanduser('~/tensorflow_datasets')
  for directory, origin in roots + [(tfds_default, 'TFDS default')]:
    dataset = _try_tfds(name, directory, origin, tried)
    if dataset is not None:
      return dataset
  raise DatasetNotFoundError(_not_found_message(name, tried))


def _not_found_message(name: str, tried: list) -> str:
  files = ', '.join(f'{f}.gz' for f in _IDX_FILES.values())
  how = []
  if name in DEBIAN_PACKAGES:
    package, directory = DEBIAN_PACKAGES[name]
    how.append(f'apt-get install {package}  (puts the IDX files in {directory})')
  if name in _IDX_CLASS_NAMES:
    how.append(f'put the IDX files ({files}; uncompressed also accepted) in DIR and pass '
               f'--set data.data_dir=DIR, or export {DATA_ENV}=ROOT with them in '
               f'ROOT/{name}')
  if name == 'keywords':
    how.append('apt-get install espeak-ng  (the set is then generated on first use)')
    how.append('or run `python scripts/make_keywords.py --out DIR` where espeak-ng '
               f'is installed, copy DIR here and pass --set data.data_dir=DIR or export '
               f'{DATA_ENV}=DIR')
  else:
    manual = ' --manual_dir CIFAR_N_LABEL_FILES' if DATASETS[name].noisy_label_columns else ''
    how.append(f'prepare it with TFDS on a machine with network (`tfds build {name} '
               f'--data_dir DIR{manual}`), copy DIR here and pass --set data.data_dir=DIR '
               f'or export {DATA_ENV}=DIR')
  return (f"dataset '{name}' not found. Tried:\n" + ''.join(f'  - {t}\n' for t in tried)
          + 'To provide it:\n' + ''.join(f'  - {h}\n' for h in how)).rstrip()


def _load_digits() -> Dataset:
  """scikit-learn's 1,797 8x8 digits (pixels 0..16 scaled by 1/16); stratified 80/20."""
  from sklearn import datasets, model_selection  # pylint: disable=g-import-not-at-top
  digits = datasets.load_digits()
  x = (digits.images / 16.0).astype(np.float32)[..., None]
  y = digits.target.astype(np.int64)
  x_train, x_test, y_train, y_test = model_selection.train_test_split(
      x, y, test_size=0.2, stratify=y, random_state=0)
  return Dataset('digits', x_train, y_train, x_test, y_test, 10, (8, 8, 1),
                 [str(d) for d in range(10)])


def _load_keywords(candidates: list, tried: list) -> Dataset:
  """The espeak-ng keyword set from the first directory that has it, else generated."""
  from tff_noisy.data import keywords  # pylint: disable=g-import-not-at-top
  cache = os.path.join(cache_root(), 'keywords')
  for directory, origin in candidates + [(cache, f'${CACHE_ENV} cache')]:
    path = os.path.join(directory, keywords.FILENAME)
    if os.path.isfile(path):
      break
    tried.append(f'{path} ({origin}): no such file')
  else:  # Generated into the cache, the last place tried.
    if not keywords.espeak_available():
      tried.append('generating it: espeak-ng is not installed')
      raise DatasetNotFoundError(_not_found_message('keywords', tried))
    print(f'keywords: not found, generating it with espeak-ng into {path}', file=sys.stderr)
    keywords.write(path, keywords.synthesise(progress=True))
  arrays = keywords.read(path)
  splits = {s: (arrays[f'x_{s}'], arrays[f'y_{s}']) for s in ('train', 'test')}
  return _to_dataset('keywords', splits, arrays['class_names'].tolist(), {}, path,
                     scale=32768.0)


def _idx_paths(directory: str, origin: str, tried: list) -> Optional[dict]:
  """Returns the four IDX file paths in directory, or None (noting why in tried)."""
  if not os.path.isdir(directory):
    tried.append(f'IDX files in {directory} ({origin}): no such directory')
    return None
  paths, missing = {}, []
  for key, stem in _IDX_FILES.items():
    found = [os.path.join(directory, stem + ext) for ext in ('.gz', '')
             if os.path.isfile(os.path.join(directory, stem + ext))]
    if found:
      paths[key] = found[0]
    else:
      missing.append(stem + '[.gz]')
  if missing:
    tried.append(f'IDX files in {directory} ({origin}): missing {", ".join(missing)}')
    return None
  return paths


def read_idx(path: str) -> np.ndarray:
  """Reads an unsigned-byte IDX array (LeCun's MNIST format), gzipped or not."""
  with (gzip.open if path.endswith('.gz') else open)(path, 'rb') as f:
    data = f.read()
  if len(data) < 4 or data[:3] != b'\x00\x00\x08':
    raise DatasetError(f'{path}: not an unsigned-byte IDX file')
  ndim = data[3]
  shape = tuple(int(d) for d in np.frombuffer(data, '>i4', count=ndim, offset=4))
  values = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
  if values.size != int(np.prod(shape)):
    raise DatasetError(f'{path}: header says {shape} but holds {values.size} values')
  return values.reshape(shape)


def _from_idx(name: str, paths: dict) -> Dataset:
  arrays = {key: read_idx(path) for key, path in paths.items()}
  splits = {}
  for split in ('train', 'test'):
    x, y = arrays[f'x_{split}'], arrays[f'y_{split}']
    if x.ndim != 3 or len(x) != len(y) or y.ndim != 1:
      raise DatasetError(f'{paths[f"x_{split}"]}: {x.shape} images do not match '
                         f'{y.shape} labels in {paths[f"y_{split}"]}')
    splits[split] = (x[..., None], y)
  return _to_dataset(name, splits, list(_IDX_CLASS_NAMES[name]), {},
                     f'IDX files in {os.path.dirname(paths["x_train"])}', scale=255.0)


def _to_dataset(name: str, splits: dict, class_names: list, noisy: dict, origin: str,
                scale: float) -> Dataset:
  """Checks raw (x, y) splits against the dataset's spec and scales x by 1/scale."""
  spec = DATASETS[name]
  out = {}
  for split, (x, y) in splits.items():
    if x.shape[1:] != spec.input_shape:
      raise DatasetError(f'{name} from {origin}: {split} inputs have shape {x.shape[1:]}, '
                         f'expected {spec.input_shape}')
    y = np.asarray(y, np.int64)
    if y.size and (y.min() < 0 or y.max() >= spec.num_classes):
      raise DatasetError(f'{name} from {origin}: {split} labels outside '
                         f'[0, {spec.num_classes})')
    out[split] = (np.divide(x, scale, dtype=np.float32), y)
  return Dataset(name, out['train'][0], out['train'][1], out['test'][0], out['test'][1],
                 spec.num_classes, spec.input_shape, class_names,
                 {col: np.asarray(v, np.int64) for col, v in noisy.items()})


def _try_tfds(name: str, directory: str, origin: str, tried: list) -> Optional[Dataset]:
  """Loads a prepared TFDS dataset from directory, or returns None (noting why)."""
  # Checked first so that a missing dataset costs no TensorFlow import.
  if not os.path.isdir(os.path.join(directory, name)):
    tried.append(f"TFDS '{name}' in {directory} ({origin}): no "
                 f'{os.path.join(directory, name)}')
    return None
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = tfds.builder(name, data_dir=directory)
  if not builder.is_prepared():
    tried.append(f"TFDS '{name}' in {directory} ({origin}): not prepared "
                 f'(looked for {builder.data_dir})')
    return None
  audio = name == 'speech_commands'
  columns = DATASETS[name].noisy_label_columns
  splits, noisy = {}, {}
  for split in ('train', 'test'):
    features = ['audio' if audio else 'image', 'label']
    if split == 'train':
      features += columns.values()
    arrays = _read_tfds(builder, split, features, audio)
    splits[split] = (arrays[features[0]], arrays['label'])
    if split == 'train':
      noisy = {column: arrays[feature] for column, feature in columns.items()}
  return _to_dataset(name, splits, list(builder.info.features['label'].names), noisy,
                     f'TFDS {builder.data_dir}', scale=32768.0 if audio else 255.0)


def _read_tfds(builder, split: str, features: list, audio: bool) -> dict:
  """Reads the given features of a TFDS split into numpy arrays, in batches.

  Audio clips (int16, up to 1 s) are zero-padded at the end or cut to 16,000 samples.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  def fit(example):
    clip = example['audio'][:AUDIO_SAMPLES]
    example['audio'] = tf.pad(clip, [[0, AUDIO_SAMPLES - tf.shape(clip)[0]]])
    return example

  dataset = builder.as_dataset(split=split)
  if audio:
    dataset = dataset.map(fit)
  batches = [{f: b[f] for f in features} for b in tfds.as_numpy(dataset.batch(4096))]
  return {f: np.concatenate([b[f] for b in batches]) for f in features}
