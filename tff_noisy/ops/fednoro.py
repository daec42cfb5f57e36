"""FedNoRo's maths in NumPy (Wu et al., IJCAI 2023, stage 2; released code wnn2000/FedNoRo).

- The distillation weight's ramp (the code's ``sigmoid_rampup``, from Laine & Aila
  2017): λ(r) = a·exp(-5 (1 - (clip(r, s, e) - s) / (e - s))²), 1-based rounds ``r``;
  the code's defaults s = 11, e = 50 are its 0-based 10 and 49.
- The noisy clients' knowledge-distillation loss (the code's ``LA_KD``): with the logit-adjusted
  log-probabilities log q = log_softmax(z + log π) (π: the client's observed-label prior)
  and the teacher's p = softmax(z_g / T) (the received global model, temperature T),
  ``(1 - λ) (-log q_ŷ) + λ Σ_c p_c (log p_c - log q_c)``. The code's π has a zero (log π
  = -inf) for a class the client lacks and it replaces the resulting -inf log q_c by 0,
  so such a class adds ``p_c log p_c`` (no gradient) and the softmax runs over the
  present classes; here π is floored (``label_distribution.PRIOR_FLOOR``) like every
  logit-adjusted loss of this package and log q_c of an absent class is replaced by 0
  the same way (the floor changes the present classes' q by at most ~1e-8 relatively).
- Distance-aware aggregation, DaAgg: a noisy client k's distance is its local
  model's smallest distance to a clean client's, d_k = min_{j clean} dist(w_k, w_j), with
  dist the sum of per-variable L2 norms as the code computes it (``model_dist``); D_k =
  d_k / max_k d_k (clean clients: 0) and the weights are n_k exp(-D_k), normalised.
"""

from typing import NamedTuple

import numpy as np
import scipy.special

from tff_noisy.ops import common
from tff_noisy.ops import label_distribution

OK = 'ok'
NO_NOISY = 'no noisy client in the round: weights by examples'
NO_CLEAN = ('no clean client in the round: every client equally far, weights by examples '
            '(exp(-1) each, normalised)')


def kd_weight(round_num: int, scale: float, start: int, end: int) -> float:
  """λ(r) of the module doc: ``scale``·exp(-5 (1 - t)²), t = (clip(r) - start) / (end - start)."""
  if end <= start:
    raise ValueError(f'the ramp needs end > start, got start={start}, end={end}')
  phase = 1.0 - (np.clip(round_num, start, end) - start) / (end - start)
  return float(scale * np.exp(-5.0 * phase * phase))


def logit_adjusted_kd_loss(logits, labels, teacher_logits, class_counts,
                           kd_weight_value: float, temperature: float) -> np.ndarray:
  """The noisy clients' per-example loss [B] (module doc); ``class_counts`` [C]: the
  client's observed labels per class, which give π and the absent classes."""
  counts = np.asarray(class_counts, np.float64)
  prior = np.maximum(counts / max(counts.sum(), 1.0), label_distribution.PRIOR_FLOOR)
  present = counts > 0
  log_q = scipy.special.log_softmax(np.asarray(logits, np.float64) + np.log(prior), axis=-1)
  log_q = np.where(present[None, :], log_q, 0.0)
  log_p = scipy.special.log_softmax(np.asarray(teacher_logits, np.float64) / temperature,
                                    axis=-1)
  kl = np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)
  nll = -np.take_along_axis(log_q, np.asarray(labels)[:, None], axis=1)[:, 0]
  return (1.0 - kd_weight_value) * nll + kd_weight_value * kl


def model_distance(update_a, update_b) -> float:
  """Sum over variables of the L2 norm of their difference (the code's ``model_dist``).

  Local models w_k = g - Δ_k share the global model g, so their distance is that of
  their updates Δ (lists of arrays, one per variable)."""
  return float(sum(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                   for a, b in zip(update_a, update_b)))


class DaAgg(NamedTuple):
  weights: np.ndarray  # [K], summing to 1 (0 for a client of size 0).
  distances: np.ndarray  # D_k [K] in [0, 1]; 0 for clean clients.
  status: str


def daagg_weights(sizes, noisy, updates) -> DaAgg:
  """DaAgg's weights of a round's clients (module doc).

  ``sizes`` n_k [K] (a client of size 0, e.g. a non-finite update, takes no part: weight
  0, and is no reference for the others), ``noisy`` flags [K], ``updates`` each client's
  list of per-variable arrays. A round with no noisy client, or no clean one, weighs by
  ``sizes`` and says so in ``status``.
  """
  sizes = np.asarray(sizes, np.float64)
  noisy = np.asarray(noisy, bool)
  if sizes.shape != noisy.shape or len(updates) != len(sizes):
    raise ValueError(f'{sizes.shape} sizes, {noisy.shape} flags, {len(updates)} updates')
  taking_part = sizes > 0
  clean = np.flatnonzero(taking_part & ~noisy)
  flagged = np.flatnonzero(taking_part & noisy)
  distances = np.zeros(len(sizes))
  status = NO_NOISY if not len(flagged) else NO_CLEAN if not len(clean) else OK
  if status == OK:
    for k in flagged:
      distances[k] = min(model_distance(updates[k], updates[j]) for j in clean)
    if distances.max() > 0:
      distances = distances / distances.max()
  return DaAgg(common.normalize_weights(sizes * np.exp(-distances)), distances, status)
