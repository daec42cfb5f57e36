"""k-nearest-neighbour label correction: NNC of FedLN (Tsouvalas et al. 2023, Eq. 1).

Each sample's label becomes the majority label of its k nearest neighbours (Euclidean,
raw embeddings) among the same client's samples (FedLN §2; docs/papers/fedln.md, ambiguity 6).

The search is exact and blocked, and computes each distance once. Distances are
symmetric, so the product of one block pair (I, J), I <= J, serves the rows of block I
(columns J) and, transposed, the rows of block J (columns I): half the N x N products.
TensorFlow computes the products because its matrix product is several times faster
than NumPy's BLAS on this stack. Each sample x is extended to [x, n, 1] and
[-2x, 1, n], with n = ||x||^2 minus its mean over the samples, so that one product is
the symmetric ||a - b||^2 - 2 mean ||x||^2: the constant shift changes no ranking and
keeps the values small, so they round finely.

Each row keeps its k nearest columns so far, whose largest distance bounds its k-th
neighbour's from above: only distances at or below the bound can enter. After a row's
first blocks these are few, so a block costs a comparison and a sparse extraction
rather than a selection over its columns. The diagonal blocks come first; before a row
has k candidates, its bound is the k-th smallest minimum of k or more disjoint groups
of its columns (each minimum is a distinct distance). A row's nearest are complex keys
distance + 1j * column, so one partition moves both, and equal distances rank by
column. Two threads share this selection (NumPy releases the GIL in its loops): the
rows of I and those of J, or the two halves of a diagonal block's rows.
"""

import concurrent.futures

import numpy as np
import tensorflow as tf

from tff_noisy.ops import common

_MAX_GROUP = 8  # Columns per group for the first bound; more: fewer minima, looser bound.


def _augmented_blocks(embeddings: np.ndarray, block_size: int) -> list:
  """Per block of rows, the tensors [x, n, 1] and [-2x, 1, n] (see the module doc)."""
  norms = np.einsum('ij,ij->i', embeddings, embeddings, dtype=np.float64)
  norms = (norms - norms.mean()).astype(embeddings.dtype)[:, None]
  ones = np.ones_like(norms)
  blocks = []
  for start in range(0, embeddings.shape[0], block_size):
    x, n, one = (array[start:start + block_size] for array in (embeddings, norms, ones))
    blocks.append((tf.constant(np.hstack([x, n, one])),
                   tf.constant(np.hstack([-2 * x, one, n]))))
  return blocks


def _first_bound(distances: np.ndarray, k: int) -> np.ndarray:
  """Per row, the k-th smallest of group minima over the columns (inf if < k columns)."""
  num_rows, num_columns = distances.shape
  group = min(_MAX_GROUP, num_columns // k)
  if not group:
    return np.full(num_rows, np.inf, distances.dtype)
  used = num_columns // group * group
  minima = distances[:, :used].reshape(num_rows, group, used // group).min(axis=1)
  return np.partition(minima, k - 1, axis=1)[:, k - 1]


def _merge(nearest: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
  """Merges keys of ``rows`` (grouped) into the k per row of ``nearest``, in place.

  Returns each row's new k-th smallest distance.
  """
  num_rows, k = nearest.shape
  counts = np.bincount(rows, minlength=num_rows)
  slots = np.arange(k, k + rows.size) - (np.cumsum(counts) - counts)[rows]
  merged = np.full((num_rows, k + counts.max(initial=0)), np.inf, nearest.dtype)
  merged[:, :k] = nearest
  merged[rows, slots] = keys
  nearest[:] = np.partition(merged, k - 1, axis=1)[:, :k]
  return nearest[:, k - 1].real


def _update(distances: np.ndarray, nearest: np.ndarray, bound: np.ndarray, offset: int,
            transposed: bool, scratch: np.ndarray) -> None:
  """Merges each row's distances at or below its bound into its nearest, in place.

  The rows are those of ``distances``, whose columns start at ``offset``, or with
  ``transposed`` its columns. ``bound`` is lowered to the new k-th smallest distances.
  ``scratch`` is a bool buffer of at least ``distances.size``.
  """
  mask = scratch[:distances.size].reshape(distances.shape)
  np.less_equal(distances, bound[None, :] if transposed else bound[:, None], out=mask)
  found = np.flatnonzero(mask)  # Fast on sparse bool arrays; 2-D np.nonzero is not.
  rows, columns = np.divmod(found, distances.shape[1])
  if transposed:
    # Grouped by the new rows. A stable sort of 16-bit keys is a linear radix sort.
    order = np.argsort(columns.astype(np.min_scalar_type(distances.shape[1])),
                       kind='stable')
    found, rows, columns = found[order], columns[order], rows[order]
  bound[:] = _merge(nearest, rows, distances.reshape(-1)[found] + 1j * (columns + offset))


def _first_update(distances: np.ndarray, nearest: np.ndarray, bound: np.ndarray,
                  offset: int, scratch: np.ndarray) -> None:
  """:func:`_update` for rows with no nearest yet, bounded by :func:`_first_bound`."""
  bound[:] = _first_bound(distances, nearest.shape[1])
  _update(distances, nearest, bound, offset, False, scratch)


def _check_embeddings(embeddings) -> np.ndarray:
  embeddings = np.asarray(embeddings)
  if embeddings.ndim != 2:
    raise ValueError(f'embeddings must have shape [N, D], got {embeddings.shape}')
  return embeddings.astype(np.float64 if embeddings.dtype == np.float64 else np.float32,
                           copy=False)


def nearest_neighbors(embeddings, k: int, include_self: bool = True,
                      block_size: int = 4096) -> np.ndarray:
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
  blocks = _augmented_blocks(embeddings, block_size)
  starts = range(0, num_samples, block_size)
  # complex64 holds the float32 distances, and column indices exactly below 2**24.
  key_type = (np.complex64 if embeddings.dtype == np.float32 and num_samples <= 2**24
              else np.complex128)
  nearest = np.full((num_samples, search_k), np.inf, key_type)
  bound = np.empty(num_samples, embeddings.dtype)
  scratch = np.empty((2, min(block_size, num_samples) ** 2), dtype=bool)
  pairs = ([(i, i) for i in range(len(starts))]
           + [(i, j) for i in range(len(starts)) for j in range(i + 1, len(starts))])
  # Diagonal blocks first: they give each row its first candidates and bound.
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    for i, j in pairs:
      rows = slice(starts[i], starts[i] + block_size)
      columns = slice(starts[j], starts[j] + block_size)
      # np.asarray shares the product's memory; Tensor.numpy() would copy it.
      distances = np.asarray(tf.matmul(blocks[i][0], blocks[j][1], transpose_b=True))
      if i == j:
        halves = slice(0, distances.shape[0] // 2), slice(distances.shape[0] // 2, None)
        jobs = [(_first_update, distances[half], nearest[rows][half], bound[rows][half],
                 starts[j]) for half in halves]
      else:
        jobs = [(_update, distances, nearest[rows], bound[rows], starts[j], False),
                (_update, distances, nearest[columns], bound[columns], starts[i], True)]
      # The two jobs update different rows, so they run in parallel.
      for running in [pool.submit(*job, buffer) for job, buffer in zip(jobs, scratch)]:
        running.result()
  neighbors = np.sort(nearest, axis=1).imag.astype(np.int64)
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


def relabelling_counts(observed, labels, true) -> dict:
  """How labels differ from the ``observed`` ones against the ``true`` ones: ``changed``,
  ``corrected`` (a wrong observed label made right), ``broken`` (a right one made wrong),
  and the wrong labels before and after."""
  observed, labels, true = map(np.asarray, (observed, labels, true))
  wrong = observed != true
  return {'changed': int(np.sum(labels != observed)),
          'corrected': int(np.sum(wrong & (labels == true))),
          'broken': int(np.sum(~wrong & (labels != true))),
          'wrong_before': int(wrong.sum()), 'wrong_after': int(np.sum(labels != true))}
