"""FedCorr's maths in NumPy (Xu et al., CVPR 2022: the pre-processing and fine-tuning
stages; released code Xu-Jingyi/FedCorr, ``main.py`` and ``util/util.py``).

- Local intrinsic dimension (LID; Houle 2013's maximum-likelihood estimator, the code's
  ``lid_term``): for each of a client's local-model output vectors, with r_1 <= ... <=
  r_k its distances to its k nearest other outputs, LID = -k / (Σ_i log(r_i / (r_k + ε))
  + ε), ε = 1e-6. A client's LID score is the mean over its outputs; k is clipped to the
  client's size - 1.
- Noisy clients (pre-processing): a two-component GMM on the clients' cumulative LID
  scores; the component with the larger mean is noisy (``detection.gmm_partition``, one
  fit with the run's seed as ``random_state``, as the code). A client whose table holds
  no outputs (all zeros: the initial state, which a client whose update was rejected as
  non-finite keeps) has no LID score (NaN) and counts as noisy, outside the fit: its zero
  LID would make it the cleanest.
- A noisy client's noise level (pre-processing): a two-component GMM on its per-sample
  losses; μ̂ = the share of its samples in the larger-mean component (clean clients: 0);
  1 when no label has any probability (a table without outputs), so that fine-tuning
  leaves it out.
- Relabelling (pre-processing): of a noisy client's ⌊n μ̂ r⌋ largest-loss samples (r: the
  relabel ratio), those on which the global model's largest probability exceeds the
  confidence threshold take its argmax; after fine-tuning every sample of a noisy
  client where it does.
- The adaptive proximal term of pre-processing's local training, β μ̂_k ‖w − w_g‖ (the
  code's norm, not its square), has the gradient β μ̂_k (w − w_g) / ‖w − w_g‖, 0 at
  w = w_g (``proximal_gradients``; its TensorFlow twin is the client part's
  ``step``, ``methods/fedcorr/parts.py``).
"""

from typing import NamedTuple

import numpy as np
from scipy import spatial

from tff_noisy.ops import common
from tff_noisy.ops import detection

LID_EPS = 1e-6


def lid(outputs, k: int) -> np.ndarray:
  """LID of each row of ``outputs`` [n, d] among the others (module doc) [n]; n >= 2."""
  outputs = np.asarray(outputs, np.float64)
  if len(outputs) < 2:
    raise ValueError(f'LID needs at least 2 outputs, got {len(outputs)}')
  k = min(int(k), len(outputs) - 1)
  distances = spatial.distance.cdist(outputs, outputs)
  nearest = np.sort(distances, axis=1)[:, 1:k + 1]  # Column 0: the output itself.
  with np.errstate(divide='ignore'):
    logs = np.log(nearest / (nearest[:, -1:] + LID_EPS))
  return -k / (np.sum(logs, axis=1) + LID_EPS)


def client_lid(outputs, k: int) -> float:
  """A client's LID score: the mean LID of its outputs; 0 for fewer than 2 (no
  neighbours: it cannot look noisy); NaN for a table of zeros (no outputs: module doc)."""
  if len(outputs) < 2:
    return 0.0
  if not np.any(outputs):
    return float('nan')
  return float(np.mean(lid(outputs, k)))


def sample_losses(probs, labels) -> np.ndarray:
  """Per-sample cross-entropy -log p_ŷ [n] of probabilities ``probs`` [n, C] (at most
  NO_PROBABILITY_LOSS, for p_ŷ = 0)."""
  labels = common.check_labels(labels, np.shape(probs)[1])
  picked = np.take_along_axis(np.asarray(probs, np.float64), labels[:, None], axis=1)[:, 0]
  return -np.log(np.maximum(picked, np.finfo(np.float64).tiny))


NO_PROBABILITY_LOSS = -np.log(np.finfo(np.float64).tiny)


def noisy_clients(cumulative_lid, seed: int) -> np.ndarray:
  """bool [K]: the clients in the larger-mean component of a GMM on their cumulative LID
  scores, and those without a finite score (module doc); of the others none for fewer
  than 2 or all-equal scores."""
  scores = np.asarray(cumulative_lid, np.float64)
  noisy = ~np.isfinite(scores)
  scored = scores[~noisy]
  if len(scored) >= 2 and not np.all(scored == scored[0]):
    noisy[~noisy] = detection.gmm_partition(scored[:, None], seed)
  return noisy


def noise_level(losses, seed: int) -> float:
  """μ̂: the share of ``losses`` in the larger-mean component of a two-component GMM; 0
  for fewer than 2 samples or all-equal losses, 1 when every label had no probability
  (module doc)."""
  losses = np.asarray(losses, np.float64)
  if len(losses) >= 2 and np.all(losses == NO_PROBABILITY_LOSS):
    return 1.0
  if len(losses) < 2 or np.all(losses == losses[0]):
    return 0.0
  return float(np.mean(detection.gmm_partition(losses[:, None], seed)))


def relabel_candidates(losses, level: float, ratio: float) -> np.ndarray:
  """Positions of the ⌊n μ̂ r⌋ largest ``losses`` (pre-processing's relabelling pool)."""
  losses = np.asarray(losses, np.float64)
  count = int(len(losses) * level * ratio)
  return np.argsort(-losses, kind='stable')[:count]


class Relabelled(NamedTuple):
  labels: np.ndarray  # The new labels [n].
  changed: np.ndarray  # Positions given the global model's label (it may equal the old).


def relabel(labels, global_probs, confidence: float, candidates=None) -> Relabelled:
  """``labels`` with the global model's argmax where its largest probability exceeds
  ``confidence``, among ``candidates`` (positions; None: every sample)."""
  labels = np.asarray(labels).copy()
  probs = np.asarray(global_probs, np.float64)
  confident = np.flatnonzero(probs.max(axis=1) > confidence)
  if candidates is not None:
    confident = np.intersect1d(confident, candidates)
  labels[confident] = np.argmax(probs[confident], axis=1)
  return Relabelled(labels, confident)


def proximal_gradients(weights, initial_weights, strength: float) -> list:
  """Gradient of ``strength``·‖w − w_g‖ over all ``weights`` (a list of arrays): the
  difference over its norm times ``strength``; zeros where w = w_g."""
  diffs = [np.asarray(w, np.float64) - np.asarray(w0, np.float64)
           for w, w0 in zip(weights, initial_weights)]
  norm = np.sqrt(sum(np.sum(d ** 2) for d in diffs))
  return [strength * d / norm if norm > 0 else np.zeros_like(d) for d in diffs]
