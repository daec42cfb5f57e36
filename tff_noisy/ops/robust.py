"""Byzantine-robust aggregation rules over [J, D] client updates.

Coordinate-wise median and trimmed mean (Yin et al. 2018, "Byzantine-Robust Distributed
Learning: Towards Optimal Statistical Rates", Def. 1 and 2) and (multi-)Krum (Blanchard
et al. 2017, "Machine Learning with Adversaries: Byzantine Tolerant Gradient Descent",
§4). All three are unweighted, as in the papers: a client's weight only decides whether
it takes part. ``mask`` is [J] booleans, 0/1 or client weights; a client where it is 0
(one whose update was zeroed as non-finite) takes no part, and the rules count n, the
clients that do. Impossible arguments raise ValueError; the TFF aggregators return zeros
when no client takes part (federated/aggregators/).
"""

from typing import NamedTuple, Optional

import numpy as np


class KrumResult(NamedTuple):
  aggregate: np.ndarray  # [D] mean of the selected points.
  selected: np.ndarray  # [m] indices into the J points, lowest score first.
  scores: np.ndarray  # [J] Krum scores; inf for excluded points.


def _included(points, mask: Optional[np.ndarray]):
  """Returns ([J, D] points, [J] bool mask); raises ValueError when none is included."""
  points = np.asarray(points)
  if points.ndim != 2:
    raise ValueError(f'points must be [J, D], got shape {points.shape}')
  if not np.issubdtype(points.dtype, np.floating):
    points = points.astype(np.float64)
  include = np.ones(len(points), bool) if mask is None else np.asarray(mask) > 0
  if include.shape != (len(points),):
    raise ValueError(f'expected a mask of {len(points)} clients, got shape {include.shape}')
  if not include.any():
    raise ValueError('every client is excluded: nothing to aggregate')
  if not np.all(np.isfinite(points[include])):
    raise ValueError('the points of included clients must be finite')
  return points, include


def coordinate_median(points, mask=None) -> np.ndarray:
  """Per-coordinate median of the included points (the mean of the middle two for even n)."""
  points, include = _included(points, mask)
  return np.median(points[include], axis=0)


def num_trimmed(num_clients: int, beta: float) -> int:
  """floor(beta * n): how many values :func:`trimmed_mean` drops at each end."""
  if not 0 <= beta < 0.5:
    raise ValueError(f'beta must be in [0, 0.5), got {beta}')
  return int(np.floor(beta * num_clients))


def trimmed_mean(points, beta: float = 0.1, mask=None) -> np.ndarray:
  """Per coordinate, the mean after dropping the floor(beta * n) largest and smallest values.

  beta < 0.5 leaves at least one value of n >= 1.
  """
  points, include = _included(points, mask)
  values = np.sort(points[include], axis=0)
  k = num_trimmed(len(values), beta)
  return values[k:len(values) - k].mean(axis=0)


def krum(points, f: int = 1, m: int = 1, mask=None) -> KrumResult:
  """(Multi-)Krum: the mean of the m points of lowest score.

  A point's score is the sum of its squared distances to its n - f - 2 nearest other
  included points; f is the number of Byzantine clients tolerated. m = 1 is Krum; m > 1
  multi-Krum, which averages the selected points without weights. Ties go to the lower
  index.
  """
  points, include = _included(points, mask)
  n = int(include.sum())
  if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 0:
    raise ValueError(f'f must be an integer >= 0, got {f!r}')
  if n - f - 2 < 1:
    raise ValueError(f'Krum needs n - f - 2 >= 1: with n={n} included clients f can be at '
                     f'most {n - 3}, and f={f} needs n >= {f + 3}')
  if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= n - f:
    raise ValueError(f'm must be an integer in [1, n - f] = [1, {n - f}], got {m!r}')
  rows = np.flatnonzero(include)
  chosen = points[rows].astype(np.float64)
  squared = np.stack([((chosen - x) ** 2).sum(axis=1) for x in chosen])
  np.fill_diagonal(squared, np.inf)
  local_scores = np.sort(squared, axis=1)[:, :n - f - 2].sum(axis=1)
  scores = np.full(len(points), np.inf)
  scores[rows] = local_scores
  selected = rows[np.argsort(local_scores, kind='stable')[:m]]
  return KrumResult(points[selected].mean(axis=0), selected, scores)
