"""k-nearest-neighbour label correction: NNC of FedLN (Tsouvalas et al. 2023, Eq. 1).

Each sample's label becomes the majority label of its k nearest neighbours (Euclidean,
raw embeddings) among the same client's samples (specs/fedln.md §2).

The search is exact and blocked. TensorFlow computes a block of squared distances
||b||^2 - 2 a.b (the per-query ||a||^2 does not change the ranking) because its matrix
product is several times faster than NumPy's BLAS on this stack. The k smallest per
row are then found without a full selection over N columns: the columns are cut into
groups of up to 32; the k-th smallest group minimum bounds the k-th smallest distance
from above, so only the k groups with the smallest minima can hold a neighbour.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.ops import common

_MAX_GROUP = 32


@tf.function(reduce_retracing=True)
def _distance_block(queries, database, squared_norms, group):
  """||b||^2 - 2 a.b as [B, N' / group, group], and its minimum over each group."""
  distances = squared_norms[None, :] - 2.0 * tf.matmul(queries, database, transpose_b=True)
  distances = tf.reshape(distances, [tf.shape(queries)[0], -1, group])
  return distances, tf.reduce_min(distances, axis=-1)


@tf.function(reduce_retracing=True)
def _gather_groups(grouped_distances, groups):
  return tf.gather(grouped_distances, groups, batch_dims=1)


def _k_smallest(grouped_distances: tf.Tensor, group_min: np.ndarray, k: int) -> np.ndarray:
  """Column indices of the k smallest distances of each row, nearest first.

  Only the k groups with the smallest minima leave TensorFlow (the whole block is a
  large copy).
  """
  num_rows, _, group = grouped_distances.shape
  rows = np.arange(num_rows)[:, None]
  groups = np.argpartition(group_min, k - 1, axis=1)[:, :k]
  bound = group_min[rows, groups].max(axis=1)  # >= the k-th smallest distance.
  candidates = _gather_groups(grouped_distances, groups).numpy().reshape(num_rows, -1)
  hit_rows, hit_positions = np.nonzero(candidates <= bound[:, None])  # >= k per row.
  counts = np.bincount(hit_rows, minlength=num_rows)
  slots = np.arange(hit_rows.size) - (np.cumsum(counts) - counts)[hit_rows]
  values = np.full((num_rows, counts.max()), np.inf, dtype=candidates.dtype)
  values[hit_rows, slots] = candidates[hit_rows, hit_positions]
  columns = np.zeros(values.shape, dtype=np.int64)
  columns[hit_rows, slots] = (groups[hit_rows, hit_positions // group] * group
                              + hit_positions % group)
  order = np.argsort(values, axis=1, kind='stable')[:, :k]
  return np.take_along_axis(columns, order, axis=1)


def _check_embeddings(embeddings) -> np.ndarray:
  embeddings = np.asarray(embeddings)
  if embeddings.ndim != 2:
    raise ValueError(f'embeddings must have shape [N, D], got {embeddings.shape}')
  return embeddings.astype(np.float64 if embeddings.dtype == np.float64 else np.float32,
                           copy=False)


def nearest_neighbors(embeddings, k: int, include_self: bool = True,
                      block_size: int = 512) -> np.ndarray:
  """Indices [N, k'] of each sample's k nearest samples (Euclidean), nearest first.

  Exact; float64 embeddings are searched in float64, all others in float32.
  ``include_self=True`` counts a sample as its own neighbour (distance 0), as FedLN
  does. k is clipped to the neighbours available: k' = min(k, N) with the sample
  itself, min(k, N - 1) without it. (FedLN says k = N - 1 when N <= k; with
  ``include_self`` the sample is one of the k, so all N are available.)
  """
  embeddings = _check_embeddings(embeddings)
  if k < 1:
    raise ValueError(f'k must be >= 1, got k={k}')
  num_samples = embeddings.shape[0]
  available = num_samples if include_self else num_samples - 1
  if available < 1:
    raise ValueError(f'{num_samples} sample(s) have no neighbours '
                     f'(include_self={include_self})')
  k = min(k, available)
  # Without the sample itself: search one more, then drop the sample (or the farthest
  # one, if near-duplicates rank ahead of it).
  search_k = k if include_self else k + 1
  group = max(1, min(_MAX_GROUP, num_samples // search_k))
  padded = -(-num_samples // group) * group
  database = np.zeros((padded, embeddings.shape[1]), dtype=embeddings.dtype)
  database[:num_samples] = embeddings
  squared_norms = np.full(padded, np.inf, dtype=embeddings.dtype)  # Pads are never near.
  squared_norms[:num_samples] = np.square(embeddings, dtype=np.float64).sum(axis=1)
  database = tf.constant(database)
  squared_norms = tf.constant(squared_norms)
  blocks = []
  for start in range(0, num_samples, block_size):
    grouped_distances, group_min = _distance_block(
        database[start:min(start + block_size, num_samples)], database, squared_norms,
        tf.constant(group))
    blocks.append(_k_smallest(grouped_distances, group_min.numpy(), search_k))
  neighbors = np.concatenate(blocks)
  if include_self:
    return neighbors
  keep = neighbors != np.arange(num_samples)[:, None]
  keep[keep.all(axis=1), -1] = False
  return neighbors[keep].reshape(num_samples, k)


def _check_labels(labels, num_samples: int, num_classes=None):
  labels = np.asarray(labels)
  if labels.shape != (num_samples,):
    raise ValueError(f'{num_samples} embeddings but labels of shape {labels.shape}')
  if num_classes is None:
    num_classes = int(labels.max()) + 1 if labels.size else 1
  return common.check_labels(labels, num_classes), num_classes


def knn_vote(embeddings, labels, k: int, include_self: bool = True, seed: int = 0,
             num_classes=None) -> np.ndarray:
  """NNC (Eq. 1): y_i <- argmax_c sum_{l in N_k(i)} 1[y_l = c], ties broken at random.

  Returns the voted labels [N] int64. Each class tied for the most votes wins with
  equal probability (seeded). See :func:`nearest_neighbors` for k and ``include_self``.
  """
  embeddings = _check_embeddings(embeddings)
  labels, num_classes = _check_labels(labels, embeddings.shape[0], num_classes)
  neighbors = nearest_neighbors(embeddings, k, include_self)
  num_samples = labels.size
  counts = np.bincount(
      (np.arange(num_samples)[:, None] * num_classes + labels[neighbors]).ravel(),
      minlength=num_samples * num_classes).reshape(num_samples, num_classes)
  # Uniform noise in [0, 1) reorders only classes whose counts are equal.
  jitter = np.random.default_rng(seed).random(counts.shape)
  return np.argmax(counts + jitter, axis=1)


def knn_accuracy(embeddings, true_labels, k: int = 10, seed: int = 0) -> float:
  """Leave-one-out k-NN accuracy: how well an embedding separates the true classes."""
  true_labels = np.asarray(true_labels)
  votes = knn_vote(embeddings, true_labels, k, include_self=False, seed=seed)
  return float(np.mean(votes == true_labels))


def _ratio(numerator, denominator) -> float:
  return float(numerator / denominator) if denominator else float('nan')


def correction_report(y_observed, y_corrected, y_true) -> dict:
  """What a label correction did, measured against the simulation's true labels.

  fraction_changed: share of labels the correction changed; precision: share of the
  changed labels that became right; noise_before / noise_after: share of wrong labels;
  fixed: share of wrong labels made right; corrupted: share of right labels made wrong.
  Undefined ratios are NaN.
  """
  y_observed, y_corrected, y_true = map(np.asarray, (y_observed, y_corrected, y_true))
  if not y_observed.size or not y_observed.shape == y_corrected.shape == y_true.shape:
    raise ValueError(f'need three non-empty label arrays of one shape, got '
                     f'{y_observed.shape}, {y_corrected.shape}, {y_true.shape}')
  changed = y_corrected != y_observed
  wrong_before = y_observed != y_true
  right_after = y_corrected == y_true
  return {
      'num_examples': int(y_observed.size),
      'fraction_changed': float(changed.mean()),
      'precision': _ratio(np.sum(changed & right_after), changed.sum()),
      'noise_before': float(wrong_before.mean()),
      'noise_after': float(1.0 - right_after.mean()),
      'fixed': _ratio(np.sum(wrong_before & right_after), wrong_before.sum()),
      'corrupted': _ratio(np.sum(~wrong_before & ~right_after), np.sum(~wrong_before)),
  }
