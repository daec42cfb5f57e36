"""Dataset sources: digits, IDX files (gzipped and raw), TFDS, and the not-found error."""

import gzip
import os

import numpy as np
import pytest

from tff_noisy.data import sources

DEBIAN_FMNIST = sources.DEBIAN_PACKAGES['fashion_mnist'][1]


def _write_idx(path, array, compress):
  header = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, '>i4').tobytes()
  with (gzip.open if compress else open)(path, 'wb') as f:
    f.write(header + array.astype(np.uint8).tobytes())


def _write_idx_set(directory, compress, seed=0, n_train=30, n_test=10):
  """Writes a tiny MNIST-format dataset; returns its raw (x_train, y_train)."""
  os.makedirs(directory, exist_ok=True)
  rng = np.random.default_rng(seed)
  arrays = {
      'train-images-idx3-ubyte': rng.integers(0, 256, (n_train, 28, 28)),
      'train-labels-idx1-ubyte': rng.integers(0, 10, n_train),
      't10k-images-idx3-ubyte': rng.integers(0, 256, (n_test, 28, 28)),
      't10k-labels-idx1-ubyte': rng.integers(0, 10, n_test),
  }
  for stem, array in arrays.items():
    _write_idx(os.path.join(directory, stem + ('.gz' if compress else '')), array, compress)
  return arrays['train-images-idx3-ubyte'], arrays['train-labels-idx1-ubyte']


@pytest.fixture
def no_installed_data(tmp_path, monkeypatch):
  """Hides the Debian files, $TFF_NOISY_DATA and the TFDS default directory."""
  monkeypatch.setitem(sources.DEBIAN_PACKAGES, 'fashion_mnist',
                      ('dataset-fashion-mnist', str(tmp_path / 'debian')))
  monkeypatch.delenv(sources.DATA_ENV, raising=False)
  monkeypatch.setenv('TFDS_DATA_DIR', str(tmp_path / 'tfds'))


def test_digits():
  ds = sources.load_dataset('digits')
  assert ds.x_train.shape == (1437, 8, 8, 1) and ds.x_test.shape == (360, 8, 8, 1)
  assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
  assert ds.x_train.min() == 0 and ds.x_train.max() == 1
  assert (ds.num_classes, ds.input_shape, len(ds.class_names)) == (10, (8, 8, 1), 10)
  totals = np.bincount(ds.y_train) + np.bincount(ds.y_test)
  assert np.abs(np.bincount(ds.y_test) - 0.2 * totals).max() <= 1  # Stratified 80/20.
  np.testing.assert_array_equal(ds.x_train, sources.load_dataset('digits').x_train)


@pytest.mark.parametrize('compress', [True, False])
def test_idx_files_from_data_dir(tmp_path, no_installed_data, compress):
  x, y = _write_idx_set(tmp_path / 'files', compress)
  ds = sources.load_dataset('mnist', data_dir=str(tmp_path / 'files'))
  assert ds.x_train.shape == (30, 28, 28, 1) and ds.x_test.shape == (10, 28, 28, 1)
  assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int64
  np.testing.assert_array_equal(ds.x_train[..., 0], (x / np.float32(255)).astype(np.float32))
  np.testing.assert_array_equal(ds.y_train, y)
  assert ds.class_names == [str(d) for d in range(10)]


def test_search_order_data_dir_then_env_subdir_then_debian(tmp_path, monkeypatch,
                                                         no_installed_data):
  _, y_given = _write_idx_set(tmp_path / 'given', compress=True, seed=1)
  _, y_env = _write_idx_set(tmp_path / 'root' / 'fashion_mnist', compress=False, seed=2)
  _, y_debian = _write_idx_set(tmp_path / 'debian', compress=True, seed=3)
  monkeypatch.setenv(sources.DATA_ENV, str(tmp_path / 'root'))
  load = sources.load_dataset
  np.testing.assert_array_equal(load('fashion_mnist', str(tmp_path / 'given')).y_train,
                                y_given)
  ds = load('fashion_mnist')
  np.testing.assert_array_equal(ds.y_train, y_env)
  assert ds.class_names[0] == 'T-shirt/top'
  monkeypatch.delenv(sources.DATA_ENV)
  np.testing.assert_array_equal(load('fashion_mnist').y_train, y_debian)


def test_not_found_names_every_place_and_the_remedies(tmp_path, monkeypatch,
                                                      no_installed_data):
  partial = tmp_path / 'partial'
  _write_idx_set(partial, compress=True)
  os.remove(partial / 't10k-labels-idx1-ubyte.gz')
  monkeypatch.setenv(sources.DATA_ENV, str(partial))
  (tmp_path / 'empty').mkdir()
  with pytest.raises(sources.DatasetNotFoundError) as error:
    sources.load_dataset('fashion_mnist', data_dir=str(tmp_path / 'empty'))
  message = str(error.value)
  for expected in ["'fashion_mnist' not found", str(tmp_path / 'empty'),
                   'missing t10k-labels-idx1-ubyte', str(tmp_path / 'debian'),
                   str(tmp_path / 'tfds'), 'apt-get install dataset-fashion-mnist',
                   '--set data.data_dir=', '$TFF_NOISY_DATA', 'TFF_NOISY_DATA=',
                   'tfds build fashion_mnist']:
    assert expected in message, expected
  assert isinstance(error.value, sources.DatasetError)


def test_data_dir_that_does_not_exist_is_an_error(tmp_path):
  with pytest.raises(sources.DatasetError, match='data.data_dir: no such directory: .*absent'):
    sources.load_dataset('mnist', data_dir=str(tmp_path / 'absent'))


def test_not_found_tfds_only_dataset(no_installed_data):
  with pytest.raises(sources.DatasetNotFoundError) as error:
    sources.load_dataset('cifar10_n')
  message = str(error.value)
  assert "TFDS 'cifar10_n'" in message and '--manual_dir' in message
  assert 'data.data_dir: not set' in message and 'apt-get' not in message


def test_unknown_dataset_lists_the_names():
  with pytest.raises(ValueError, match='unknown dataset.*digits, mnist, fashion_mnist'):
    sources.load_dataset('imagenet')


def test_malformed_idx(tmp_path, no_installed_data):
  _write_idx_set(tmp_path, compress=False)
  (tmp_path / 'train-labels-idx1-ubyte').write_bytes(b'\x00\x00\x0d\x01garbage')
  with pytest.raises(sources.DatasetError, match='not an unsigned-byte IDX file'):
    sources.load_dataset('mnist', data_dir=str(tmp_path))


def test_prepared_tfds_datasets(tmp_path, monkeypatch, no_installed_data):
  """TFDS's mock data stands in for prepared CIFAR-10N and Speech Commands."""
  tfds = pytest.importorskip('tensorflow_datasets')
  monkeypatch.setattr(tfds.core.DatasetBuilder, 'is_prepared', lambda self: True)
  for name in ('cifar10_n', 'speech_commands'):
    (tmp_path / name).mkdir()
  with tfds.testing.mock_data(num_examples=6):
    cifar = sources.load_dataset('cifar10_n', data_dir=str(tmp_path))
    speech = sources.load_dataset('speech_commands', data_dir=str(tmp_path))
  assert cifar.x_train.shape == (6, 32, 32, 3) and cifar.x_train.dtype == np.float32
  assert 0 <= cifar.x_train.min() and cifar.x_train.max() <= 1
  assert set(cifar.y_train_noisy) == set(sources.DATASETS['cifar10_n'].noisy_label_columns)
  assert all(v.shape == (6,) and v.dtype == np.int64 for v in cifar.y_train_noisy.values())
  assert speech.x_train.shape == (6, 16000) and speech.x_train.dtype == np.float32
  assert np.abs(speech.x_train).max() <= 1 and speech.class_names[-1] == '_unknown_'


@pytest.mark.skipif(not os.path.isdir(DEBIAN_FMNIST),
                    reason='apt-get install dataset-fashion-mnist')
def test_real_fashion_mnist_from_the_debian_package(monkeypatch):
  monkeypatch.delenv(sources.DATA_ENV, raising=False)
  ds = sources.load_dataset('fashion_mnist')
  assert ds.x_train.shape == (60000, 28, 28, 1) and ds.x_test.shape == (10000, 28, 28, 1)
  assert np.all(np.bincount(ds.y_train) == 6000)
  assert ds.x_train.max() == 1.0 and ds.x_train.min() == 0.0
