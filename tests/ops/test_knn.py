"""k-NN search and vote: exact agreement with scikit-learn, ties, clipping, errors."""

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from tff_noisy.ops import knn


def _data(n=700, d=16, num_classes=5, seed=0):
  rng = np.random.default_rng(seed)
  return rng.standard_normal((n, d)), rng.integers(0, num_classes, n)


def _sklearn_neighbors(x, k, include_self):
  model = NearestNeighbors(n_neighbors=k + (not include_self), algorithm='brute').fit(x)
  neighbors = model.kneighbors(x, return_distance=False)
  return neighbors if include_self else neighbors[:, 1:]  # Column 0 is the sample itself.


@pytest.mark.parametrize('block_size', [16, 128, 4096])  # < k = 40, > k, one block.
@pytest.mark.parametrize('include_self', [True, False])
@pytest.mark.parametrize('k', [1, 7, 40])
def test_neighbors_equal_sklearn_brute_force(include_self, k, block_size):
  x, _ = _data()
  ours = knn.nearest_neighbors(x, k, include_self=include_self, block_size=block_size)
  assert ours.shape == (len(x), k)
  np.testing.assert_array_equal(ours, _sklearn_neighbors(x, k, include_self))  # Nearest first.


@pytest.mark.parametrize('k', [1, 7, 40])
def test_float32_neighbor_sets_equal_sklearn_where_the_kth_distance_is_clear(k):
  """float32 is searched in float32: only a gap above its rounding decides alike."""
  x, _ = _data()
  distances = np.sort(((x[:, None] - x[None]) ** 2).sum(-1), axis=1)
  clear = distances[:, k] - distances[:, k - 1] > 1e-3
  assert clear.mean() > 0.95
  ours = knn.nearest_neighbors(x.astype(np.float32), k)
  theirs = _sklearn_neighbors(x.astype(np.float32), k, include_self=True)
  np.testing.assert_array_equal(np.sort(ours[clear], axis=1), np.sort(theirs[clear], axis=1))


def test_vote_equals_reference_vote_on_sklearn_neighbors():
  x, labels = _data()
  k = 15
  votes = knn.knn_vote(x, labels, k)
  neighbor_labels = labels[_sklearn_neighbors(x, k, include_self=True)]
  counts = np.array([np.bincount(row, minlength=5) for row in neighbor_labels])
  top = counts.max(axis=1, keepdims=True)
  unique = (counts == top).sum(axis=1) == 1
  assert unique.mean() > 0.5
  np.testing.assert_array_equal(votes[unique], counts.argmax(axis=1)[unique])
  tied = ~unique
  assert np.all(counts[tied, votes[tied]] == top[tied, 0])  # A tied winner is a top class.


def test_ties_are_broken_at_random_but_seeded():
  x = np.arange(400, dtype=np.float64)[:, None]
  labels = np.array([0, 1] * 200)
  # k=2: each sample and one neighbour, always one vote each for classes 0 and 1.
  votes = knn.knn_vote(x, labels, k=2, seed=3)
  np.testing.assert_array_equal(votes, knn.knn_vote(x, labels, k=2, seed=3))
  assert 0.4 < votes.mean() < 0.6
  assert not np.array_equal(votes, knn.knn_vote(x, labels, k=2, seed=4))


def test_vote_corrects_noisy_labels_in_clusters():
  rng = np.random.default_rng(0)
  true = np.repeat(np.arange(4), 100)
  x = np.eye(4)[true] * 10 + rng.standard_normal((400, 4))
  noisy = np.where(rng.random(400) < 0.3, rng.integers(0, 4, 400), true)
  corrected = knn.knn_vote(x, noisy, k=25)
  np.testing.assert_array_equal(corrected, true)
  report = knn.correction_report(noisy, corrected, true)
  assert report['noise_before'] == pytest.approx(np.mean(noisy != true))
  assert report['noise_after'] == 0.0 and report['precision'] == 1.0
  assert report['fixed'] == 1.0 and report['corrupted'] == 0.0
  assert report['fraction_changed'] == pytest.approx(np.mean(noisy != true))


def test_correction_report_counts():
  report = knn.correction_report(y_observed=[0, 1, 1, 2], y_corrected=[0, 0, 2, 2],
                                 y_true=[0, 0, 1, 1])
  assert report == pytest.approx({
      'num_examples': 4, 'fraction_changed': 0.5, 'precision': 0.5,
      'noise_before': 0.5, 'noise_after': 0.5, 'fixed': 0.5, 'corrupted': 0.5})
  assert np.isnan(knn.correction_report([1], [1], [1])['precision'])


def test_k_is_clipped_to_the_client_size():
  x, labels = _data(n=6)
  assert knn.nearest_neighbors(x, 100).shape == (6, 6)
  assert knn.nearest_neighbors(x, 100, include_self=False).shape == (6, 5)
  # With every sample voting, all labels become the client's majority label.
  labels = np.array([0, 0, 0, 1, 1, 2])
  np.testing.assert_array_equal(knn.knn_vote(x, labels, k=100), 0)
  np.testing.assert_array_equal(knn.knn_vote(x[:1], labels[:1], k=100), [0])


def test_knn_accuracy_is_leave_one_out():
  x = np.array([[0.0], [0.1], [0.2], [0.3], [5.0], [5.1], [5.2]])
  assert knn.knn_accuracy(x, [0, 0, 0, 0, 1, 1, 1], k=3) == 1.0
  # Leave-one-out: a lone sample of class 2 is outvoted by its three neighbours.
  assert knn.knn_accuracy(x, [0, 0, 0, 2, 1, 1, 1], k=3) == pytest.approx(6 / 7)


def test_errors():
  x, labels = _data(n=10)
  with pytest.raises(ValueError, match='k=0'):
    knn.knn_vote(x, labels, k=0)
  with pytest.raises(ValueError, match=r'10 embeddings .* \(9,\)'):
    knn.knn_vote(x, labels[:9], k=3)
  with pytest.raises(ValueError, match=r'label 5 .* \[0, 5\)'):
    knn.knn_vote(x, np.full(10, 5), k=3, num_classes=5)
  with pytest.raises(ValueError, match='no neighbours'):
    knn.nearest_neighbors(x[:1], 3, include_self=False)
  with pytest.raises(ValueError, match=r'\[N, D\]'):
    knn.nearest_neighbors(x[0], 3)
