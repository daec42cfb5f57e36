"""Transition-matrix estimates and the forward-corrected loss (FedEFC; Patrini et al. 2017).

Orientation throughout: ``Q[i, j] = p(noisy = i | true = j)``; rows index the noisy
label, columns the true class, and each column sums to 1 (Eq. 9 read as the paper's
implementation details and its code do; docs/papers/fedefc.md, ambiguity 1). It is the
transpose of ``data.noise``'s row-stochastic T.

- FedEFC's estimate (Eqs. 3-9): per-class thresholds tau_j, each sample's confident guess
  of its true class (``guess``: ``passing``, the likeliest class over its threshold, or
  ``cleanlab``, [code]'s rule; docs/papers/fedefc.md, ambiguity 8), the count matrix
  C[noisy, guess], its diagonal clipped at >= 1 [code] (every column sum stays positive;
  a class no sample is guessed as gets an identity column), normalised by columns
  (``row``: the displayed Eq. 9, kept for ablation).
- Patrini's anchor estimate (the forward-correction baseline): column j is the mean
  predicted distribution of the samples whose p_j reaches its 97th percentile.
- The forward-corrected loss -log((Q softmax(z))_y + 1e-12) (Eqs. 14-16) and [code]'s
  optional class-prior compensation.

NumPy (float64); ``transition_tf`` holds the TensorFlow twins that run on the clients.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import common

THRESHOLD_FLOOR = 2e-6  # tau_j >= this [code].
THRESHOLD_SLACK = 1e-6  # A class is confident when p_j >= tau_j - this [code].
EPSILON = 1e-12  # Inside the corrected loss's log (docs/papers/fedefc.md, ambiguity 9).
SINGULAR_TOLERANCE = 1e-6  # Singular: smallest singular value <= this x the largest.
NORMALISATIONS = ('column', 'row')
GUESSES = ('passing', 'cleanlab')


def _check_probs(probs) -> np.ndarray:
  probs = np.asarray(probs, np.float64)
  if probs.ndim != 2 or not probs.shape[0] or not probs.shape[1]:
    raise ValueError(f'probs must be a non-empty [N, C] array, got shape {probs.shape}')
  return probs


def _check(probs, noisy_labels):
  probs = _check_probs(probs)
  labels = common.check_labels(noisy_labels, probs.shape[1], 'noisy label')
  if labels.shape != probs.shape[:1]:
    raise ValueError(f'{labels.size} noisy labels for {probs.shape[0]} rows of probs')
  return probs, labels


def per_class_thresholds(probs, noisy_labels) -> np.ndarray:
  """tau_j = mean of p_j over the samples labelled j (Eq. 6), floored at 2e-6 [code].

  A class no sample is labelled with gets +inf: it is never confident.
  """
  probs, labels = _check(probs, noisy_labels)
  one_hot = np.eye(probs.shape[1])[labels]
  counts = one_hot.sum(axis=0)
  sums = (one_hot * probs).sum(axis=0)
  means = np.where(counts > 0, sums / np.maximum(counts, 1), np.inf)
  return np.maximum(means, THRESHOLD_FLOOR)


def check_guess(guess: str) -> str:
  """``guess`` if it is one of ``GUESSES``; a ValueError otherwise."""
  if guess not in GUESSES:
    raise ValueError(f"guess must be one of {', '.join(GUESSES)}, got {guess!r}")
  return guess


def confident_joint(probs, noisy_labels, guess: str = 'passing') -> np.ndarray:
  """C[i, j] = #{x labelled i whose confident guess y*(x) is j} (Eqs. 3-4, 7), unclipped.

  J(x) = {j : p_j >= tau_j - 1e-6} [code]; a sample with J(x) empty is not counted. With
  one class in J(x), y*(x) is that class. With two or more: ``passing``, the class of J(x)
  with the largest p_j; ``cleanlab`` ([code]'s ``util/count.py``, cleanlab's rule), the
  argmax of p over all classes, which may be outside J(x) or a class no sample is
  labelled with.
  """
  check_guess(guess)
  probs, labels = _check(probs, noisy_labels)
  confident = probs >= per_class_thresholds(probs, labels) - THRESHOLD_SLACK
  counted = confident.any(axis=1)
  guessed = np.argmax(np.where(confident, probs, -np.inf), axis=1)
  if guess == 'cleanlab':
    guessed = np.where(confident.sum(axis=1) > 1, np.argmax(probs, axis=1), guessed)
  num_classes = probs.shape[1]
  counts = np.bincount(labels[counted] * num_classes + guessed[counted],
                       minlength=num_classes**2)
  return counts.reshape(num_classes, num_classes).astype(np.float64)


def normalise_counts(counts, normalise: str = 'column') -> np.ndarray:
  """Clips the diagonal at >= 1 [code], then makes columns (Eq. 9, p(noisy | true)) or
  rows sum to 1."""
  if normalise not in NORMALISATIONS:
    raise ValueError(f"normalise must be one of {', '.join(NORMALISATIONS)}, got "
                     f'{normalise!r}')
  counts = np.array(counts, np.float64)
  np.fill_diagonal(counts, np.maximum(np.diag(counts), 1.0))
  axis = 0 if normalise == 'column' else 1
  return counts / counts.sum(axis=axis, keepdims=True)


def estimate_transition_matrix(probs, noisy_labels, normalise: str = 'column',
                               guess: str = 'passing') -> np.ndarray:
  """FedEFC's Q [C, C] from a model's probabilities [N, C] and the noisy labels [N]."""
  return normalise_counts(confident_joint(probs, noisy_labels, guess), normalise)


def anchor_transition_matrix(probs, percentile: float = 97.0) -> np.ndarray:
  """Patrini's anchor estimate in Q's orientation: column j is the mean p over the samples
  whose p_j is at least its ``percentile``-th percentile (FedEFC §4.1's baseline)."""
  if not 0 < percentile <= 100:
    raise ValueError(f'percentile must be in (0, 100], got {percentile}')
  probs = _check_probs(probs)
  anchors = (probs >= np.percentile(probs, percentile, axis=0)).astype(np.float64)
  return (probs.T @ anchors) / anchors.sum(axis=0)


def class_prior(noisy_labels, num_classes: int) -> np.ndarray:
  """pi~_i = |X_i| / n from the noisy labels; zeros when there are none."""
  labels = common.check_labels(noisy_labels, num_classes, 'noisy label')
  return np.bincount(labels, minlength=num_classes) / max(labels.size, 1)


def compensate_prior(matrix, prior) -> np.ndarray:
  """[code]'s class-prior compensation, as the matrix the corrected loss applies.

  W_ij = Q_ij pi_i / sum_i' Q_i'j pi_i' and the loss uses p~_a = sum_b W_ba p_b, i.e.
  p~ = W^T p: this returns W^T. A column whose weights are all 0 (its mass only on
  locally absent labels) stays 0; p~ is not renormalised (the released code).
  """
  weighted = np.asarray(matrix, np.float64) * np.asarray(prior, np.float64)[:, None]
  totals = weighted.sum(axis=0, keepdims=True)
  return np.where(totals > 0, weighted / np.where(totals > 0, totals, 1.0), 0.0).T


def is_singular(matrix) -> bool:
  """Whether the smallest singular value is <= 1e-6 x the largest."""
  values = np.linalg.svd(np.asarray(matrix, np.float64), compute_uv=False)
  return bool(values[-1] <= SINGULAR_TOLERANCE * values[0])


def forward_corrected_cross_entropy(labels, logits, matrix) -> np.ndarray:
  """-log((Q softmax(z))_y + 1e-12) per example (Eqs. 14-16); NumPy twin of
  ``losses.forward_corrected_cross_entropy``."""
  logits = np.asarray(logits, np.float64)
  labels = common.check_labels(labels, logits.shape[-1])
  noisy = scipy.special.softmax(logits, axis=-1) @ np.asarray(matrix, np.float64).T
  return -np.log(noisy[np.arange(len(labels)), labels] + EPSILON)


def matrix_errors(estimated, true) -> dict:
  """L1 distance (sum of absolute differences) and cosine similarity of two matrices."""
  estimated = np.ravel(np.asarray(estimated, np.float64))
  true = np.ravel(np.asarray(true, np.float64))
  if estimated.shape != true.shape:
    raise ValueError(f'matrices of {estimated.size} and {true.size} entries')
  norms = np.linalg.norm(estimated) * np.linalg.norm(true)
  return {'l1': float(np.abs(estimated - true).sum()),
          'cosine': float(estimated @ true / norms) if norms > 0 else float('nan')}


def matrix_error_report(estimates: dict, truths: dict) -> dict:
  """Each client's ``matrix_errors`` of ``estimates[cid]`` against ``truths[cid]``, and
  their means over clients."""
  per_client = {cid: matrix_errors(matrix, truths[cid]) for cid, matrix in estimates.items()}
  return {'per_client': per_client,
          'mean_l1': float(np.mean([e['l1'] for e in per_client.values()])),
          'mean_cosine': float(np.mean([e['cosine'] for e in per_client.values()]))}
