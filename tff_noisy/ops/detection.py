"""Noisy-client detection by a two-component Gaussian mixture (MaskedOptim, FedNoRo).

At the end of warm-up every client reports its per-class mean cross-entropy under the
global model, ``class_losses[k, c] = mean_{i in D_k, y_i = c} CE(z_i, y_i)`` (NaN where the
client has no sample of class c). The server (MaskedOptim §4.1, as its released code does it):

1. fills each NaN with its column's minimum (a column with no value at all: 0);
2. min-max scales each column to [0, 1] (a constant column: 0);
3. fits ``sklearn.mixture.GaussianMixture(2)`` (full covariance) with ``random_state``
   0..8; in each fit the noisy side is the component whose mean vector has the larger
   sum, and the partition that occurs most often over the fits is kept (the first one
   in seed order on a tie, as the released code's ``cnt.index(max(cnt))``);
4. if one side is empty, no client is noisy (docs/papers/maskedoptim.md, ambiguity 9).

Fewer than 2 clients, or rows that are all equal after scaling, give no noisy client
and a ``status`` saying so. :func:`detection_report` compares flags with the simulation's
true per-client noise rates (reporting only).
"""

import collections
import warnings
from typing import NamedTuple, Optional

import numpy as np

from tff_noisy.ops import common

OK = 'ok'
ONE_SIDE_EMPTY = 'one side empty: no client is noisy'
TOO_FEW_CLIENTS = 'fewer than 2 clients: detection skipped, no client is noisy'
IDENTICAL_CLIENTS = 'every client has the same loss vector: no client is noisy'


class Detection(NamedTuple):
  noisy: np.ndarray  # bool [N]
  status: str  # OK or why no client is flagged.
  agreeing_fits: int  # How many of the fits gave the kept partition.
  fits: int


def class_mean_losses(losses, labels, num_classes: int) -> np.ndarray:
  """Per-class mean of per-sample ``losses`` [n] by ``labels`` [n]; NaN for an absent class."""
  labels = common.check_labels(labels, num_classes)
  losses = np.asarray(losses, np.float64)
  sums = np.bincount(labels, weights=losses, minlength=num_classes)
  counts = np.bincount(labels, minlength=num_classes)
  with np.errstate(invalid='ignore', divide='ignore'):
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def fill_missing(class_losses) -> np.ndarray:
  """NaN -> its column's minimum ([C]); a column that is all NaN -> 0."""
  values = np.array(class_losses, np.float64)
  if values.ndim != 2:
    raise ValueError(f'class_losses must be [clients, classes], got shape {values.shape}')
  if np.any(np.isinf(values)):
    raise ValueError('class_losses must be finite or NaN (a missing class), got inf')
  missing = np.isnan(values)
  present = np.where(missing, np.inf, values)
  column_min = present.min(axis=0) if len(values) else np.zeros(values.shape[1])
  column_min = np.where(np.isfinite(column_min), column_min, 0.0)
  return np.where(missing, column_min[None, :], values)


def minmax_columns(values) -> np.ndarray:
  """Each column scaled to [0, 1] by its min and max; a constant column becomes 0."""
  values = np.asarray(values, np.float64)
  low, high = values.min(axis=0), values.max(axis=0)
  span = high - low
  return np.where(span > 0, (values - low) / np.where(span > 0, span, 1.0), 0.0)


def gmm_partition(features, seed: int) -> np.ndarray:
  """One fit: bool [N], True on the component whose mean vector has the larger sum."""
  from sklearn import mixture  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():  # Few clients in C dimensions: expected warnings.
    warnings.simplefilter('ignore')
    gmm = mixture.GaussianMixture(n_components=2, covariance_type='full',
                                  random_state=seed).fit(features)
    assigned = gmm.predict(features)
  return assigned == int(np.argmax(gmm.means_.sum(axis=1)))


def vote(class_losses, fits: int = 9) -> Detection:
  """The detection with its status (see the module doc); ``fits`` seeds 0..fits-1."""
  if fits < 1:
    raise ValueError(f'fits must be >= 1, got {fits}')
  values = fill_missing(class_losses)
  n = len(values)
  if n < 2:
    return Detection(np.zeros(n, bool), TOO_FEW_CLIENTS, 0, 0)
  features = minmax_columns(values)
  if np.all(features == features[0]):
    return Detection(np.zeros(n, bool), IDENTICAL_CLIENTS, 0, 0)
  partitions = [tuple(gmm_partition(features, seed)) for seed in range(fits)]
  counts = collections.Counter(partitions)
  best = max(counts.values())
  kept = next(p for p in partitions if counts[p] == best)  # First in seed order on a tie.
  noisy = np.array(kept, bool)
  if noisy.all() or not noisy.any():
    return Detection(np.zeros(n, bool), ONE_SIDE_EMPTY, best, fits)
  return Detection(noisy, OK, best, fits)


def detect_noisy_clients(class_losses, fits: int = 9) -> np.ndarray:
  """bool [N]: which clients are noisy, from their per-class mean losses [N, C]."""
  return vote(class_losses, fits).noisy


def detection_report(flagged, true_rates, high_rate: float = 0.5) -> dict:
  """Flags against the simulation's realised per-client noise rates (reporting only).

  ``precision``/``recall`` take a client as truly noisy when its rate is > 0;
  ``recall_high_noise``/``precision_high_noise`` when it is >= ``high_rate``. A ratio
  with an empty denominator is None. Also the mean true rate of flagged and unflagged
  clients.
  """
  flagged = np.asarray(flagged, bool)
  rates = np.asarray(true_rates, np.float64)
  if flagged.shape != rates.shape:
    raise ValueError(f'{flagged.shape} flags for {rates.shape} rates')

  def ratio(hits, total) -> Optional[float]:
    return float(hits / total) if total else None

  def mean(values) -> Optional[float]:
    return float(values.mean()) if values.size else None

  noisy, high = rates > 0, rates >= high_rate
  return {
      'flagged': int(flagged.sum()), 'truly_noisy': int(noisy.sum()),
      'precision': ratio(np.sum(flagged & noisy), flagged.sum()),
      'recall': ratio(np.sum(flagged & noisy), noisy.sum()),
      'high_rate': float(high_rate),
      'precision_high_noise': ratio(np.sum(flagged & high), flagged.sum()),
      'recall_high_noise': ratio(np.sum(flagged & high), high.sum()),
      'mean_rate_flagged': mean(rates[flagged]),
      'mean_rate_unflagged': mean(rates[~flagged]),
  }
