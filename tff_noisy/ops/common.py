"""Helpers shared by the ops: class-label validation and client-weight normalisation."""

import numpy as np


def check_labels(labels, num_classes: int, name: str = 'label') -> np.ndarray:
  """Returns integer ``labels`` as int64; raises ValueError naming a value outside [0, C)."""
  labels = np.asarray(labels)
  if num_classes < 1:
    raise ValueError(f'num_classes must be >= 1, got {num_classes}')
  if labels.size and not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(f'{name}s must be integer class labels, got dtype {labels.dtype}')
  if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
    bad = labels.min() if labels.min() < 0 else labels.max()
    raise ValueError(f'{name} {bad} is outside the allowed range [0, {num_classes})')
  return labels.astype(np.int64)


def normalize_weights(scores) -> np.ndarray:
  """Returns ``scores / sum(scores)``, or equal weights when every score is 0.

  The equal-weight fallback is FedDS's rule ([code] of Dong et al. 2026) and serves
  NA-FedAvg too. Raises ValueError for an empty, negative or non-finite score.
  """
  scores = np.asarray(scores, dtype=np.float64)
  if scores.ndim != 1 or not scores.size:
    raise ValueError(f'expected a non-empty 1-D array of scores, got shape {scores.shape}')
  if not np.all(np.isfinite(scores)) or np.any(scores < 0):
    raise ValueError(f'scores must be finite and non-negative, got {scores}')
  total = scores.sum()
  if total == 0:
    return np.full(scores.shape, 1.0 / scores.size)
  return scores / total
