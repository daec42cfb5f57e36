"""Geometric median of client updates by Weiszfeld's algorithm (RFA and MaskedOptim).

The weighted geometric median z* = argmin_z sum_j w_j ||x_j - z|| moves by a bounded
amount however far a minority of the weight is dragged (RFA: Pillutla, Kakade and
Harchaoui 2022, "Robust Aggregation for Federated Learning"). Weiszfeld's iteration,
started at the weighted mean, re-weights each point by its inverse distance:

  beta_j = w_j / max(nu, ||x_j - z||),   z' = sum_j beta_j x_j / sum_j beta_j

Two variants:

- :func:`weiszfeld` / :func:`geometric_median`: RFA's smoothed Weiszfeld on the whole
  flattened update, with the clients' weights. ``smoothing`` is RFA's nu, the per-point
  distance floor (the ``eps`` of the ``geom-median`` package). ``eps`` is the tolerance:
  the iteration stops, keeping z, once a step is shorter than ``eps * f(z)``, where
  f(z) = sum_j w_j ||x_j - z|| (weights normalised) is the objective at z: the spread of
  the updates around z, so the test does not depend on their scale. RFA and the package
  stop on the relative change of f instead, which would take one more pass per check.
- :func:`weiszfeld_per_tensor` / :func:`geometric_median_per_tensor`: MaskedOptim's
  released code (the paper's §4.3, Alg. 2; docs/papers/maskedoptim.md): Weiszfeld on each
  tensor on its own, unweighted, with ``eps`` both the distance floor and the absolute
  tolerance: stop, keeping mu, once ||mu' - mu|| < eps.

Points of weight 0 (a client whose update was zeroed) take no part in either. With no
point left, or a non-finite value in a point that takes part, a ValueError is raised;
the TFF aggregators return zeros instead (federated/aggregators/).
"""

from typing import NamedTuple, Sequence

import numpy as np

# Values per block when computing distances: a [J, block] temporary of about 1M values
# instead of a [J, D] copy of the points.
_BLOCK_VALUES = 1 << 20


class GeometricMedianResult(NamedTuple):
  median: np.ndarray  # [D]; a list of arrays for the per-tensor variant.
  iterations: int  # Steps taken (<= max_iter); an int array [T] per tensor.
  objective: float  # sum_j w_j ||x_j - median||, weights normalised; [T] per tensor.


def _distances(points: np.ndarray, z: np.ndarray) -> np.ndarray:
  """||x_j - z|| for every row, in column blocks; squares summed in float64 across blocks."""
  num_points, dim = points.shape
  block = max(1, min(dim, _BLOCK_VALUES // max(num_points, 1)))
  buffer = np.empty((num_points, block), points.dtype)
  squares = np.zeros(num_points)
  for start in range(0, dim, block):
    stop = min(start + block, dim)
    diff = buffer[:, :stop - start]
    np.subtract(points[:, start:stop], z[start:stop], out=diff)
    squares += np.einsum('ij,ij->i', diff, diff)
  return np.sqrt(squares)


def _weiszfeld(points, weights, max_iter, floor, tolerance, relative):
  """Weiszfeld from the weighted mean; weights [n] > 0 sum to 1, points [n, D].

  Stops, keeping z, once ||z' - z|| < tolerance (times f(z) if ``relative``) or the step
  is 0. Returns (z, steps taken, f(z)).
  """
  z = weights.astype(points.dtype) @ points
  if not np.all(np.isfinite(z)):
    raise ValueError('the points of included clients must be finite')
  iterations = 0
  for _ in range(max_iter):
    distances = _distances(points, z)
    objective = float(weights @ distances)
    beta = weights / np.maximum(distances, floor)
    candidate = (beta / beta.sum()).astype(points.dtype) @ points
    step = float(np.linalg.norm(candidate - z))
    if step == 0 or step < tolerance * (objective if relative else 1.0):
      break
    z = candidate
    iterations += 1
  return z, iterations, float(weights @ _distances(points, z))


def _check_iterations(max_iter: int, eps: float):
  if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 0:
    raise ValueError(f'max_iter must be an integer >= 0, got {max_iter!r}')
  if not eps >= 0:
    raise ValueError(f'eps must be >= 0, got {eps}')


def _included(weights, num_points: int) -> np.ndarray:
  """Normalised weights of the points with weight > 0, as [J] (0 for the others)."""
  weights = np.asarray(weights, dtype=np.float64)
  if weights.shape != (num_points,):
    raise ValueError(f'expected {num_points} weights, got shape {weights.shape}')
  if not np.all(np.isfinite(weights)) or np.any(weights < 0):
    raise ValueError(f'weights must be finite and >= 0, got {weights}')
  if not np.any(weights > 0):
    raise ValueError('every point has weight 0: no client to aggregate')
  return weights / weights.sum()


def weiszfeld(points, weights, max_iter: int = 10, eps: float = 1e-5,
              smoothing: float = 1e-6) -> GeometricMedianResult:
  """RFA's smoothed Weiszfeld on [J, D] points with [J] weights (see module doc).

  Float32 points stay float32 (the weighted sums are BLAS matrix-vector products); squared
  distances are summed in float32 within column blocks and in float64 across them.

  Args:
    points: [J, D] client updates, flattened.
    weights: [J] client weights >= 0; points of weight 0 are ignored.
    max_iter: Weiszfeld steps at most (0: the weighted mean).
    eps: Tolerance: stop once a step is shorter than ``eps`` times the objective.
    smoothing: RFA's nu > 0, the floor of every point's distance to the estimate.
  """
  points = np.asarray(points)
  if points.ndim != 2:
    raise ValueError(f'points must be [J, D], got shape {points.shape}')
  if not np.issubdtype(points.dtype, np.floating):
    points = points.astype(np.float64)
  _check_iterations(max_iter, eps)
  if not smoothing > 0:
    raise ValueError(f'smoothing must be > 0, got {smoothing}')
  weights = _included(weights, points.shape[0])
  keep = weights > 0
  if not keep.all():
    points, weights = points[keep], weights[keep]
  z, iterations, objective = _weiszfeld(points, weights, max_iter, smoothing, eps, True)
  return GeometricMedianResult(z, iterations, objective)


def geometric_median(points, weights, max_iter: int = 10, eps: float = 1e-5,
                     smoothing: float = 1e-6) -> np.ndarray:
  """The [D] weighted geometric median of [J, D] points by :func:`weiszfeld`."""
  return weiszfeld(points, weights, max_iter, eps, smoothing).median


def weiszfeld_per_tensor(points: Sequence[Sequence[np.ndarray]], mask=None,
                         max_iter: int = 10, eps: float = 1e-5) -> GeometricMedianResult:
  """MaskedOptim's Weiszfeld run on each tensor separately (MaskedOptim Alg. 2).

  Per tensor: mu = mean of the included X_i; up to ``max_iter`` times,
  a_i = 1/max(||X_i - mu||, eps) normalised, mu' = sum_i a_i X_i, stop if
  ||mu' - mu|| < eps, else mu = mu'. No client weights and no RFA smoothing.

  Args:
    points: Per client, its list of tensors (all clients alike in shapes).
    mask: [J] booleans, 0/1 or client weights; clients where it is 0 are left out
      (None: all take part).
    max_iter: Weiszfeld steps at most per tensor.
    eps: Distance floor and absolute tolerance.

  Returns:
    The per-tensor medians (list), and per tensor the steps taken and the mean
    distance of the included clients to the median.
  """
  _check_iterations(max_iter, eps)
  if not eps > 0:
    raise ValueError(f'eps is also the distance floor and must be > 0, got {eps}')
  if not len(points):
    raise ValueError('no clients to aggregate')
  num_tensors = len(points[0])
  if any(len(client) != num_tensors for client in points):
    raise ValueError('every client must give the same number of tensors')
  include = np.ones(len(points)) if mask is None else np.asarray(mask, dtype=np.float64)
  weights = _included(include > 0, len(points))
  rows = np.flatnonzero(weights > 0)
  medians, iterations, objectives = [], [], []
  for t in range(num_tensors):
    tensors = [np.asarray(points[i][t]) for i in rows]
    shape = tensors[0].shape
    if any(x.shape != shape for x in tensors):
      raise ValueError(f'tensor {t} differs in shape between clients')
    stacked = np.stack([x.reshape(-1) for x in tensors])
    if not np.issubdtype(stacked.dtype, np.floating):
      stacked = stacked.astype(np.float64)
    z, steps, objective = _weiszfeld(stacked, weights[rows], max_iter, eps, eps, False)
    medians.append(z.reshape(shape))
    iterations.append(steps)
    objectives.append(objective)
  return GeometricMedianResult(medians, np.array(iterations), np.array(objectives))


def geometric_median_per_tensor(points: Sequence[Sequence[np.ndarray]], max_iter: int = 10,
                                eps: float = 1e-5, mask=None) -> list:
  """MaskedOptim's per-tensor geometric median (:func:`weiszfeld_per_tensor`)."""
  return weiszfeld_per_tensor(points, mask, max_iter, eps).median
