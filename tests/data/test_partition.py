"""Partitions: coverage, determinism and the skew each scheme promises."""

import numpy as np
import pytest

from tff_noisy.config import ConfigError, PartitionConfig
from tff_noisy.data import partition as partition_lib

LABELS = np.repeat(np.arange(10), 200)  # 2,000 samples, 10 balanced classes.


def _split(name, labels=LABELS, seed=0, **kwargs):
  return partition_lib.partition(labels, PartitionConfig(name=name, **kwargs), seed)


def _classes_per_client(parts, labels=LABELS, min_count=1):
  return np.array([(np.bincount(labels[p], minlength=10) >= min_count).sum()
                    for p in parts])


@pytest.mark.parametrize('name', sorted(partition_lib.PARTITIONS))
def test_every_sample_goes_to_exactly_one_client(name):
  parts = _split(name, num_clients=10)
  assert len(parts) == 10
  assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) and len(p) for p in parts)
  np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(len(LABELS)))


@pytest.mark.parametrize('name', sorted(partition_lib.PARTITIONS))
def test_seeded(name):
  first, again, other = _split(name, seed=3), _split(name, seed=3), _split(name, seed=4)
  assert all(np.array_equal(a, b) for a, b in zip(first, again))
  assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_iid_sizes_are_equal():
  sizes = [len(p) for p in _split('iid', labels=LABELS[:1999], num_clients=10)]
  assert max(sizes) - min(sizes) <= 1


def test_iid_sigma_size_spread_matches_sigma():
  labels = np.zeros(200_000, np.int64)
  sizes = np.array([len(p) for p in _split('iid_sigma', labels, num_clients=400, sigma=0.25)])
  assert sizes.min() >= 1
  assert abs(sizes.std() / sizes.mean() - 0.25) < 0.03
  equal = [len(p) for p in _split('iid_sigma', num_clients=7, sigma=0.0)]
  assert max(equal) - min(equal) <= 1


def test_dirichlet_skew_grows_as_alpha_shrinks():
  skewed = _split('dirichlet', num_clients=10, alpha=0.1, min_size=10)
  mild = _split('dirichlet', num_clients=10, alpha=100.0, min_size=10)
  assert min(len(p) for p in skewed) >= 10
  # Classes holding >= 5% of a client's 200 expected samples.
  assert _classes_per_client(skewed, min_count=10).mean() < 6
  assert _classes_per_client(mild, min_count=10).mean() == 10


def test_dirichlet_gives_up_with_a_clear_error(monkeypatch):
  monkeypatch.setattr(partition_lib, 'MAX_DRAWS', 5)
  with pytest.raises(ConfigError, match=r'partition\.min_size.*5 draws'):
    _split('dirichlet', num_clients=10, alpha=0.05, min_size=190)


def test_shards_give_each_client_at_most_its_shards_classes():
  parts = _split('shards', num_clients=10, shards_per_client=2)
  assert _classes_per_client(parts).max() <= 2
  assert {len(p) for p in parts} == {200}
  with pytest.raises(ConfigError, match='partition.shards_per_client'):
    _split('shards', labels=LABELS[:30], num_clients=10, shards_per_client=4)


def test_fedcorr_holds_a_subset_of_classes():
  parts = _split('fedcorr', num_clients=20, class_prob=0.3, alpha=5.0, min_size=5)
  held = _classes_per_client(parts)
  assert held.min() >= 1 and held.mean() < 6  # ~ 0.3 * 10 classes, plus redraws.
  assert min(len(p) for p in parts) >= 5
  # With few clients and a small class_prob some class is held by no client at first:
  # it must still be given out.
  parts = _split('fedcorr', num_clients=2, class_prob=0.1, min_size=1, seed=1)
  np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(len(LABELS)))


def test_apportion_is_proportional_and_exact():
  counts = partition_lib.apportion(10, [1.0, 1.0, 1.0])
  assert counts.sum() == 10 and sorted(counts) == [3, 3, 4]
  counts = partition_lib.apportion(7, [0.5, 0.0, 0.5])
  assert counts.sum() == 7 and counts[1] == 0 and abs(counts[0] - counts[2]) == 1


def test_errors():
  with pytest.raises(ConfigError, match=r"partition\.name.*iid, iid_sigma"):
    _split('nope')
  with pytest.raises(ConfigError, match='partition.num_clients: 11 clients'):
    _split('iid', labels=LABELS[:10], num_clients=11)
