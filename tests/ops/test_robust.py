"""Coordinate median, trimmed mean and (multi-)Krum; robustness of every rule to 3 of 10."""
import numpy as np
import pytest

from tff_noisy.ops import geometric_median as gm
from tff_noisy.ops import robust


def test_coordinate_median_by_hand():
  points = np.array([[1.0, 10.0], [2.0, 20.0], [100.0, -5.0]])
  np.testing.assert_array_equal(robust.coordinate_median(points), [2.0, 10.0])
  # Even n: the mean of the middle two; a masked client takes no part.
  even = np.array([[1.0], [2.0], [3.0], [10.0], [np.nan]])
  np.testing.assert_array_equal(robust.coordinate_median(even, [1, 1, 1, 1, 0]), [2.5])


def test_trimmed_mean_by_hand():
  points = np.array([[1.0, -1.0], [2.0, -2.0], [3.0, -3.0], [4.0, -4.0], [100.0, -100.0]])
  np.testing.assert_array_equal(robust.trimmed_mean(points, 0.2), [3.0, -3.0])
  # n = 4 after the mask: floor(0.2 * 4) = 0 trimmed.
  np.testing.assert_array_equal(robust.trimmed_mean(points, 0.2, [1, 1, 1, 1, 0]),
                                [2.5, -2.5])
  np.testing.assert_array_equal(robust.trimmed_mean(points, 0.0), points.mean(axis=0))
  assert robust.num_trimmed(10, 0.3) == 3 and robust.num_trimmed(9, 0.1) == 0


def test_krum_by_hand():
  # Squared distances to the 2 nearest others (n=5, f=1): scores 5, 2, 5, 65, 82.
  points = np.array([[0.0], [1.0], [2.0], [10.0], [11.0]])
  result = robust.krum(points, f=1)
  np.testing.assert_array_equal(result.scores, [5, 2, 5, 65, 82])
  assert result.selected.tolist() == [1] and result.aggregate.tolist() == [1.0]
  multi = robust.krum(points, f=1, m=3)  # The tie 0/2 goes to the lower index.
  assert multi.selected.tolist() == [1, 0, 2] and multi.aggregate.tolist() == [1.0]
  # Without client 1 (n=4: one neighbour), the pair 10/11 scores lowest.
  masked = robust.krum(points, f=1, mask=[1, 0, 1, 1, 1])
  assert masked.selected.tolist() == [3] and np.isinf(masked.scores[1])


@pytest.mark.parametrize('call, message', [
    (lambda p: robust.krum(p, f=2), r'f can be at most 1, and f=2 needs n >= 5'),
    (lambda p: robust.krum(p, f=1, m=4), r'm must be an integer in \[1, n - f\] = \[1, 3\]'),
    (lambda p: robust.krum(p, f=-1), 'f must be an integer >= 0'),
    (lambda p: robust.trimmed_mean(p, 0.5), r'beta must be in \[0, 0.5\)'),
    (lambda p: robust.coordinate_median(p, np.zeros(4)), 'every client is excluded'),
    (lambda p: robust.coordinate_median(p, np.ones(3)), 'mask of 4 clients'),
    (lambda p: robust.trimmed_mean(np.where(p > 0, np.inf, p), 0.1), 'must be finite'),
])
def test_impossible_arguments_raise(call, message):
  with pytest.raises(ValueError, match=message):
    call(np.arange(8.0).reshape(4, 2))


def _attacked(attack, seed=0, dim=50):
  """10 clients: a common vector plus small noise; clients 2, 5, 8 attacked."""
  rng = np.random.default_rng(seed)
  honest = rng.normal(size=dim) + 0.02 * rng.normal(size=(10, dim))
  points = honest.copy()
  bad = [2, 5, 8]
  points[bad] = 100 * points[bad] if attack == 'scaled' else -points[bad]
  keep = np.setdiff1d(np.arange(10), bad)
  return points, rng.uniform(1, 3, 10), honest[keep].mean(axis=0)


RULES = {
    'geometric_median': lambda p, w: gm.geometric_median(p, w),
    'geometric_median_per_tensor': lambda p, w: np.concatenate(
        gm.geometric_median_per_tensor([[x[:20], x[20:]] for x in p], mask=w)),
    'coordinate_median': lambda p, w: robust.coordinate_median(p, w),
    'trimmed_mean': lambda p, w: robust.trimmed_mean(p, 0.3, w),
    'krum': lambda p, w: robust.krum(p, f=3, mask=w).aggregate,
    'multi_krum': lambda p, w: robust.krum(p, f=3, m=2, mask=w).aggregate,
}


def _relative_error(got, target):
  return np.linalg.norm(got - target) / np.linalg.norm(target)


@pytest.mark.parametrize('attack', ['scaled', 'sign_flipped'])
@pytest.mark.parametrize('rule', list(RULES))
def test_three_of_ten_attacked(rule, attack):
  points, weights, honest_mean = _attacked(attack)
  assert _relative_error(RULES[rule](points, weights), honest_mean) < 0.1
  assert _relative_error(weights @ points / weights.sum(), honest_mean) > 0.1
