"""The federated build: layout, public split, subsets, cache, determinism, errors."""

import os
import subprocess
import sys

import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy.config import ConfigError, ExperimentConfig
from tff_noisy.data import federated
from tff_noisy.data import sources

CLASS_SIZES = 50 + 10 * np.arange(10)  # 50, 60, ..., 140: 950 imbalanced samples.


def _fake_dataset(name='digits', data_dir=None):
  """A digits-shaped dataset whose inputs are their own index, x[i] = i."""
  del data_dir
  y = np.repeat(np.arange(10), CLASS_SIZES).astype(np.int64)
  y = y[np.random.default_rng(0).permutation(len(y))]
  x = np.broadcast_to(np.arange(len(y), dtype=np.float32)[:, None, None, None],
                      (len(y), 8, 8, 1)).copy()
  return sources.Dataset(name, x, y, x[:100] + 0.5, y[:100], 10, (8, 8, 1),
                         [str(d) for d in range(10)])


@pytest.fixture
def fake(monkeypatch):
  monkeypatch.setattr(sources, 'load_dataset', _fake_dataset)
  return _fake_dataset()


def _config(**sections):
  return config_lib.from_dict({'data': {'dataset': 'digits'}, **sections})


def _index(x):
  return x[:, 0, 0, 0].astype(np.int64)


def _all_arrays(fd):
  arrays = {k: v for k, v in vars(fd).items() if isinstance(v, np.ndarray)}
  for key in ('x', 'y', 'y_true'):
    arrays.update({f'{key}/{cid}': a for cid, a in getattr(fd, key).items()})
  return arrays


def test_layout_public_split_and_noise(fake, tmp_cache):
  config = _config(data={'dataset': 'digits', 'public_fraction': 0.2},
                   partition={'name': 'dirichlet', 'num_clients': 5, 'min_size': 20},
                   noise={'name': 'symmetric', 'rate': 0.3})
  fd = federated.build_federated_data(config)
  assert fd.client_ids == [f'client_{m:03d}' for m in range(5)]
  assert (fd.dataset_name, fd.num_classes, fd.input_shape) == ('digits', 10, (8, 8, 1))
  assert fd.config_hash == config.data_hash()
  public = _index(fd.x_public)
  clients = np.concatenate([_index(fd.x[c]) for c in fd.client_ids])
  # Disjoint, and together every training sample.
  np.testing.assert_array_equal(np.sort(np.concatenate([public, clients])), np.arange(950))
  np.testing.assert_array_equal(fd.y_public, fake.y_train[public])
  np.testing.assert_array_equal(np.bincount(fd.y_public), np.round(0.2 * CLASS_SIZES))
  for m, cid in enumerate(fd.client_ids):
    x, y = fd.client(cid)
    np.testing.assert_array_equal(fd.y_true[cid], fake.y_train[_index(x)])
    assert y.dtype == np.int64 and x.dtype == np.float32
    assert fd.noise_rates[m] == np.mean(y != fd.y_true[cid])
  assert abs(np.average(fd.noise_rates, weights=[len(fd.y[c]) for c in fd.client_ids])
             - 0.3) < 0.06
  assert fd.transition_matrices.shape == (5, 10, 10)
  np.testing.assert_allclose(fd.transition_matrices.sum(axis=2), 1.0)
  np.testing.assert_array_equal(fd.x_test, fake.x_test)


def test_train_and_test_subsets(fake, tmp_cache):
  fd = federated.build_federated_data(_config(
      data={'dataset': 'digits', 'train_subset': 305, 'test_subset': 17},
      partition={'num_clients': 3}))
  y_true = np.concatenate(list(fd.y_true.values()))
  assert len(y_true) == 305 and set(np.bincount(y_true)) == {30, 31}
  np.testing.assert_array_equal(fd.y_test, fake.y_test[:17])
  assert fd.x_public is None and fd.y_public is None


def test_same_config_gives_identical_arrays_fresh_or_cached(fake, tmp_path, monkeypatch):
  sections = dict(partition={'name': 'fedcorr', 'num_clients': 4, 'min_size': 5},
                  noise={'name': 'fedln', 'level': 0.5, 'sparsity': 0.4,
                         'noisy_fraction': 0.75})
  first = _config(data={'dataset': 'digits', 'cache_dir': str(tmp_path / 'a'),
                        'public_fraction': 0.1}, **sections)
  second = _config(data={'dataset': 'digits', 'cache_dir': str(tmp_path / 'b'),
                         'public_fraction': 0.1}, **sections)
  fresh, other_fresh = (federated.build_federated_data(c) for c in (first, second))
  path = os.path.join(tmp_path, 'a', first.data_hash(), federated.CACHE_FILE)
  with np.load(path, allow_pickle=False) as f:
    assert 'x' in f.files

  def no_source(*args):
    raise AssertionError('the cache should have been used')

  monkeypatch.setattr(sources, 'load_dataset', no_source)
  cached = federated.build_federated_data(first)
  expected = _all_arrays(fresh)
  for fd in (other_fresh, cached):
    got = _all_arrays(fd)
    assert got.keys() == expected.keys()
    for key, array in expected.items():
      assert got[key].dtype == array.dtype and got[key].tobytes() == array.tobytes(), key
    assert (fd.client_ids, fd.class_names, fd.input_shape) == (
        fresh.client_ids, fresh.class_names, fresh.input_shape)

  monkeypatch.setattr(sources, 'load_dataset', _fake_dataset)
  reseeded = _config(seed=1, data={'dataset': 'digits', 'cache_dir': str(tmp_path / 'a'),
                                   'public_fraction': 0.1}, **sections)
  assert reseeded.data_hash() != first.data_hash()
  changed = federated.build_federated_data(reseeded)
  assert not np.array_equal(changed.y_public, fresh.y_public)


def test_cache_dir_precedence(tmp_path, monkeypatch):
  monkeypatch.setenv(federated.CACHE_ENV, str(tmp_path / 'env'))
  config = ExperimentConfig()
  assert federated.cache_dir(config) == str(tmp_path / 'env' / config.data_hash())
  config.data.cache_dir = str(tmp_path / 'explicit')
  assert federated.cache_dir(config).startswith(str(tmp_path / 'explicit'))
  monkeypatch.delenv(federated.CACHE_ENV)
  monkeypatch.setenv('HOME', str(tmp_path / 'home'))
  config.data.cache_dir = None
  assert federated.cache_dir(config).startswith(str(tmp_path / 'home/.cache/tff-noisy'))


@pytest.mark.parametrize('sections,match', [
    ({'data': {'dataset': 'imagenet'}},
     r"data\.dataset: unknown dataset 'imagenet' Allowed: digits, mnist"),
    ({'data': {'num_classes': 12}}, r'data\.num_classes: digits has 10 classes, got 12'),
    ({'data': {'public_fraction': 1.0}}, r'data\.public_fraction: must be in \[0, 1\)'),
    ({'data': {'train_subset': 0}}, r'data\.train_subset: must be >= 1'),
    ({'partition': {'name': 'random'}},
     r"partition\.name: unknown partition 'random' Allowed: iid, iid_sigma"),
    ({'partition': {'num_clients': 0}}, r'partition\.num_clients: must be >= 1'),
    ({'partition': {'name': 'dirichlet', 'alpha': 0.0}}, r'partition\.alpha: must be > 0'),
    ({'partition': {'name': 'iid_sigma', 'sigma': -0.1}}, r'partition\.sigma: must be >= 0'),
    ({'partition': {'name': 'fedcorr', 'class_prob': 0.0}}, r'partition\.class_prob'),
    ({'partition': {'name': 'dirichlet', 'min_size': 0}}, r'partition\.min_size'),
    ({'partition': {'name': 'shards', 'shards_per_client': 0}}, r'partition\.shards_per_client'),
    ({'noise': {'name': 'gaussian'}},
     r"noise\.name: unknown noise model 'gaussian' Allowed: none, symmetric"),
    ({'noise': {'name': 'symmetric', 'rate': 1.5}}, r'noise\.rate: must be in \[0, 1\], got 1\.5'),
    ({'noise': {'name': 'fedln', 'level': -0.1}}, r'noise\.level'),
    ({'noise': {'name': 'cleanlab', 'sparsity': 2.0}}, r'noise\.sparsity'),
    ({'noise': {'name': 'pairflip', 'noisy_fraction': 1.1}}, r'noise\.noisy_fraction'),
    ({'noise': {'name': 'fedcorr', 'rho': 1.1}}, r'noise\.rho'),
    ({'noise': {'name': 'fedcorr', 'tau': -1.0}}, r'noise\.tau'),
    ({'noise': {'name': 'mixed', 'max_rate': 1.2}}, r'noise\.max_rate'),
    ({'noise': {'name': 'linear', 'min_rate': 0.6, 'max_rate': 0.4}},
     r'noise\.min_rate: must be <= noise\.max_rate=0\.4'),
    ({'noise': {'name': 'choice', 'rates': [0.1, 1.2]}}, r'noise\.rates\[1\]'),
    ({'noise': {'name': 'choice'}}, r'noise\.rates: .*non-empty'),
    ({'noise': {'name': 'choice', 'rates': [0.1], 'flip': 'random'}},
     r'noise\.flip: must be one of symmetric, pairflip'),
    ({'data': {'dataset': 'cifar100'}, 'noise': {'name': 'cifar10_asym'}},
     r'noise\.name: cifar10_asym needs a 10-class dataset; cifar100 has 100'),
    ({'data': {'dataset': 'speech_commands'}, 'noise': {'name': 'linear',
                                                        'flip': 'cifar10_asym'}},
     r'noise\.flip: cifar10_asym'),
    ({'noise': {'name': 'fedln', 'matrix_seed': 42}},
     r"noise\.matrix_seed: 'fedln' does not read it \(it reads noisy_fraction, level, "
     r'sparsity, shared_matrix\); remove it or set it back to its default \(None\), or '
     r'choose a noise that reads it'),
    ({'noise': {'name': 'symmetric', 'valid_matrix': True}},
     r"noise\.valid_matrix: 'symmetric' does not read it"),
    ({'partition': {'alpha': 0.1}},
     r"partition\.alpha: 'iid' does not read it \(it reads num_clients\); remove it or set "
     r'it back to its default \(0\.5\)'),
    ({'noise': {'name': 'cleanlab', 'matrix_seed': -1}}, r'noise\.matrix_seed: must be >= 0'),
    ({'noise': {'name': 'cleanlab', 'level': 0.95, 'valid_matrix': True}},
     r'noise\.level: a learnable matrix needs trace C\(1 - level\) > 1'),
    ({'noise': {'name': 'real'}}, r"noise\.name: 'real' needs .*cifar10_n, cifar100_n"),
    ({'data': {'dataset': 'cifar100_n'}, 'noise': {'name': 'real',
                                                   'real_labels': 'worse_label'}},
     r"noise\.real_labels: must be one of noisy_fine; got 'worse_label'"),
])
def test_config_errors(sections, match):
  values = {'data': {'dataset': 'digits'}}
  for section, fields in sections.items():
    values.setdefault(section, {}).update(fields)
  with pytest.raises(ConfigError, match=match):
    validation.validate_experiment(config_lib.from_dict(values))


@pytest.mark.parametrize('sections,match', [
    ({'partition': {'num_clients': 951}}, r'partition\.num_clients: 951 clients'),
    ({'data': {'public_fraction': 0.5}, 'partition': {'num_clients': 500}},
     r'partition\.num_clients: 500 clients but only 475'),
    ({'data': {'train_subset': 600}}, r'data\.train_subset: .*smallest digits class has 50'),
    ({'data': {'test_subset': 101}}, r'data\.test_subset: digits has 100 test examples'),
])
def test_data_dependent_errors(fake, tmp_cache, sections, match):
  values = {'data': {'dataset': 'digits'}}
  for section, fields in sections.items():
    values.setdefault(section, {}).update(fields)
  with pytest.raises(ConfigError, match=match):
    federated.build_federated_data(config_lib.from_dict(values))
  assert not os.path.exists(tmp_cache)


def test_build_checks_a_config_that_skipped_validation(fake, tmp_cache):
  config = ExperimentConfig()
  config.data.num_classes = 7
  with pytest.raises(ConfigError, match='data.num_classes'):
    federated.build_federated_data(config)


def test_client_table(fake, tmp_cache):
  fd = federated.build_federated_data(_config(
      data={'dataset': 'digits', 'public_fraction': 0.1}, partition={'num_clients': 3},
      noise={'name': 'symmetric', 'rate': 0.5, 'noisy_fraction': 0.34}))
  table = federated.format_client_table(fd)
  lines = table.splitlines()
  assert '3 clients' in lines[0] and '95 public' in lines[0]
  assert lines[1].split() == ['client', 'size', 'classes', 'noise']
  for cid, line in zip(fd.client_ids, lines[2:5]):
    assert line.split()[:3] == [cid, str(len(fd.y[cid])), '10']
  assert lines[5].split()[:3] == ['total', '855', '10']
  assert 'noisy clients: 1/3' in table
  matrix = federated.format_transition_matrix(fd).splitlines()
  rows = np.array([[float(v) for v in line.split()[2:]] for line in matrix[2:]])
  assert rows.shape == (10, 10) and np.allclose(rows.sum(axis=1), 1.0, atol=0.03)
  y_true = np.concatenate(list(fd.y_true.values()))
  y_obs = np.concatenate(list(fd.y.values()))
  kept = np.mean(y_obs[y_true == 0] == 0)
  assert rows[0, 0] == round(kept, 2)  # Pooled over the clients, clean and noisy.


def test_real_digits(tmp_cache):
  fd = federated.build_federated_data(_config(
      partition={'name': 'fedcorr', 'num_clients': 6, 'class_prob': 0.5, 'alpha': 5.0},
      noise={'name': 'cleanlab', 'level': 0.3, 'sparsity': 0.5}))
  sizes = [len(fd.y[c]) for c in fd.client_ids]
  assert sum(sizes) == 1437 and min(sizes) >= 10 and len(fd.y_test) == 360
  assert abs(np.average(fd.noise_rates, weights=sizes) - 0.3) < 0.1


def test_real_noise_from_cifar10n(tmp_path, tmp_cache, monkeypatch):
  tfds = pytest.importorskip('tensorflow_datasets')
  monkeypatch.setattr(tfds.core.DatasetBuilder, 'is_prepared', lambda self: True)
  (tmp_path / 'cifar10_n').mkdir()
  config = config_lib.from_dict({
      'data': {'dataset': 'cifar10_n', 'data_dir': str(tmp_path)},
      'partition': {'num_clients': 2},
      'noise': {'name': 'real', 'real_labels': 'worse_label'}})
  with tfds.testing.mock_data(num_examples=8):
    dataset = sources.load_dataset('cifar10_n', str(tmp_path))
    fd = federated.build_federated_data(config)
  y, y_true = np.concatenate(list(fd.y.values())), np.concatenate(list(fd.y_true.values()))
  # Mock images are random, so match samples by (true label, noisy label) pairs.
  pairs = sorted(zip(y_true, y))
  assert pairs == sorted(zip(dataset.y_train, dataset.y_train_noisy['worse_label']))


def test_data_layer_imports_neither_tensorflow_nor_tff():
  code = ('import sys; import tff_noisy.data.federated, tff_noisy.config; '
          "print(sorted(m for m in ('tensorflow', 'tensorflow_federated') "
          'if m in sys.modules))')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                       check=True)
  assert out.stdout.strip() == '[]'


def test_noise_none_ignores_the_other_noise_fields():
  """A grid's clean column switches the noise off on a noisy config's other fields."""
  config = config_lib.from_dict({'data': {'dataset': 'digits'}, 'noise': {
      'name': 'none', 'level': 0.4, 'noisy_fraction': 0.5, 'rate': 1.5}})
  validation.validate_experiment(config)


@pytest.mark.parametrize('config_file, key', [
    ('demo.yaml', '1ca1bed940561b7f'), ('fedefc_fmnist.yaml', 'ebffd301e413d35b'),
    ('fedds_fmnist.yaml', 'cd8752337e34c197'), ('fedln_fmnist.yaml', '31313fb87b0f9234'),
    ('lsc_fmnist.yaml', '110d868a72de021d'), ('maskedoptim_fmnist.yaml', 'e8556d098534fbc4'),
])
def test_shipped_configs_keep_their_data_cache_keys(config_file, key):
  """Their cached data, checkpoints and results stay valid (``ExperimentConfig.data_hash``)."""
  config = config_lib.load(os.path.join(os.path.dirname(__file__), '..', '..', 'experiments',
                                        'configs', config_file))
  assert config.data_hash() == key
