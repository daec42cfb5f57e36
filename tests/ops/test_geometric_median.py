"""Weiszfeld geometric medians (RFA's smoothed form, MaskedOptim's per-tensor form)."""
import numpy as np
import pytest
import scipy.optimize

from tff_noisy.ops import geometric_median as gm


def _objective(points, weights, z):
  weights = np.asarray(weights, np.float64) / np.sum(weights)
  return float(weights @ np.linalg.norm(points - z, axis=1))


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_minimises_the_weighted_sum_of_distances(seed):
  rng = np.random.default_rng(seed)
  points = rng.normal(size=(9, 4))
  weights = rng.uniform(0.5, 3.0, 9)
  result = gm.weiszfeld(points, weights, max_iter=2000, eps=1e-12, smoothing=1e-12)
  brute = scipy.optimize.minimize(lambda z: _objective(points, weights, z),
                                  points.mean(axis=0), method='Nelder-Mead',
                                  options={'xatol': 1e-10, 'fatol': 1e-12, 'maxiter': 20000})
  assert result.objective == pytest.approx(_objective(points, weights, result.median), rel=1e-12)
  assert result.objective <= brute.fun * (1 + 1e-4)
  assert result.objective == pytest.approx(brute.fun, rel=1e-4)


def test_starts_at_the_weighted_mean():
  rng = np.random.default_rng(0)
  points, weights = rng.normal(size=(5, 3)), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
  result = gm.weiszfeld(points, weights, max_iter=0)
  np.testing.assert_allclose(result.median, weights @ points / weights.sum())
  assert result.iterations == 0


def test_weights_are_respected():
  rng = np.random.default_rng(1)
  points = rng.normal(size=(6, 5))
  # A point holding more than half the weight is the weighted geometric median.
  heavy = np.array([6.0, 1.0, 1.0, 1.0, 1.0, 1.0])
  np.testing.assert_allclose(gm.geometric_median(points, heavy, max_iter=500, eps=0),
                             points[0], atol=1e-5)
  # Weight 2 is the same as the point twice.
  doubled = gm.geometric_median(np.vstack([points, points[:1]]), np.ones(7), max_iter=50)
  np.testing.assert_allclose(gm.geometric_median(points, [2, 1, 1, 1, 1, 1], max_iter=50),
                             doubled, rtol=1e-10)


def test_weight_zero_points_are_ignored():
  rng = np.random.default_rng(2)
  points, weights = rng.normal(size=(6, 4)), rng.uniform(1, 2, 6)
  expected = gm.weiszfeld(points, weights)
  junk = np.vstack([points[:2], np.full((1, 4), np.nan), [[1e30] * 4], points[2:]])
  got = gm.weiszfeld(junk, np.concatenate([weights[:2], [0, 0], weights[2:]]))
  np.testing.assert_array_equal(got.median, expected.median)
  assert (got.iterations, got.objective) == (expected.iterations, expected.objective)


def test_eps_is_a_tolerance_relative_to_the_objective():
  rng = np.random.default_rng(3)
  points = rng.normal(size=(20, 10)) * rng.lognormal(0, 1.5, (20, 1))
  weights = np.ones(20)
  exact = gm.weiszfeld(points, weights, max_iter=100, eps=0)
  for eps in (1e-2, 1e-5):
    loose = gm.weiszfeld(points, weights, max_iter=100, eps=eps)
    assert loose.iterations < exact.iterations
    # Invariant to the scale of the updates.
    assert gm.weiszfeld(points * 1e-3, weights, max_iter=100, eps=eps,
                        smoothing=1e-9).iterations == loose.iterations
  assert gm.weiszfeld(points, weights, max_iter=3, eps=0).iterations == 3


def test_float32_points_stay_float32():
  rng = np.random.default_rng(4)
  points = rng.normal(size=(8, 1000)).astype(np.float32)
  result = gm.weiszfeld(points, np.ones(8))
  assert result.median.dtype == np.float32
  reference = gm.weiszfeld(points.astype(np.float64), np.ones(8))
  assert result.objective == pytest.approx(reference.objective, rel=1e-6)


@pytest.mark.parametrize('weights, message', [
    (np.zeros(3), 'every point has weight 0'),
    (np.array([1.0, -1.0, 1.0]), 'finite and >= 0'),
    (np.ones(4), 'expected 3 weights'),
])
def test_bad_weights_raise(weights, message):
  with pytest.raises(ValueError, match=message):
    gm.weiszfeld(np.ones((3, 2)), weights)


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match='must be finite'):
    gm.weiszfeld([[0.0, np.inf], [1.0, 1.0]], [1, 1])
  with pytest.raises(ValueError, match='smoothing'):
    gm.weiszfeld(np.ones((2, 2)), [1, 1], smoothing=0)
  with pytest.raises(ValueError, match='max_iter'):
    gm.weiszfeld(np.ones((2, 2)), [1, 1], max_iter=-1)
  with pytest.raises(ValueError, match=r'\[J, D\]'):
    gm.weiszfeld(np.ones(3), [1, 1, 1])


def _masked_optim_reference(tensors, max_iter, eps):
  """Alg. 2 of MaskedOptim (the paper's §4.3) written out for one tensor."""
  x = np.stack([t.reshape(-1) for t in tensors])
  mu = x.mean(axis=0)
  for _ in range(max_iter):
    a = 1 / np.maximum(np.linalg.norm(x - mu, axis=1), eps)
    new = (a / a.sum()) @ x
    if np.linalg.norm(new - mu) < eps:
      break
    mu = new
  return mu.reshape(tensors[0].shape)


def test_per_tensor_matches_the_spec():
  rng = np.random.default_rng(5)
  clients = [[rng.normal(size=(3, 4)) * s, rng.normal(size=4) * s]
             for s in rng.lognormal(0, 1, 7)]
  mask = np.array([1, 1, 0, 1, 1, 1, 1])
  result = gm.weiszfeld_per_tensor(clients, mask, max_iter=10, eps=1e-5)
  kept = [c for c, m in zip(clients, mask) if m]
  for t in range(2):
    expected = _masked_optim_reference([c[t] for c in kept], 10, 1e-5)
    np.testing.assert_allclose(result.median[t], expected, rtol=1e-12)
    assert result.median[t].shape == clients[0][t].shape
    distances = [np.linalg.norm(c[t] - result.median[t]) for c in kept]
    assert result.objective[t] == pytest.approx(np.mean(distances), rel=1e-12)
  assert result.iterations.shape == (2,) and np.all(result.iterations <= 10)
  # Unweighted: client weights only decide who takes part.
  weighted = gm.geometric_median_per_tensor(clients, mask=mask * np.arange(1, 8))
  for got, expected in zip(weighted, result.median):
    np.testing.assert_array_equal(got, expected)


def test_per_tensor_stops_at_eps():
  clients = [[np.array([0.0, 0.0])], [np.array([1.0, 0.0])], [np.array([0.0, 1.0])]]
  result = gm.weiszfeld_per_tensor(clients, max_iter=500, eps=1e-5)
  assert 0 < result.iterations[0] < 500
  with pytest.raises(ValueError, match='same number of tensors'):
    gm.weiszfeld_per_tensor([[np.ones(2)], [np.ones(2), np.ones(1)]])
  with pytest.raises(ValueError, match='distance floor'):
    gm.weiszfeld_per_tensor(clients, eps=0)
