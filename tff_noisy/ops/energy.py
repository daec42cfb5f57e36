"""Energy-score noise estimates and NA-FedAvg weights (FedLN, Tsouvalas et al. 2023).

At the activation round each client scores its samples with the received global model
(s^G) and with its trained local model (s^L). The server thresholds at the nu-th
percentile of the pooled s^G; a client's noise estimate is the fraction of its s^L below
that threshold (FedLN §2, Eq. 2). The private variant sends fixed-bin histograms of
s^G instead of the scores.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import common


def energy_score(logits, temperature: float = 1.0) -> np.ndarray:
  """s(x) = -E(x) = T * log sum_c exp(f_c(x) / T) (Liu et al. 2020); [..., C] -> [...]."""
  if temperature <= 0:
    raise ValueError(f'temperature must be > 0, got {temperature}')
  logits = np.asarray(logits, dtype=np.float64)
  return temperature * scipy.special.logsumexp(logits / temperature, axis=-1)


def _check_nu(nu: float):
  if not 0 < nu < 100:
    raise ValueError(f'nu must be a percentile in (0, 100), got nu={nu}')


def pooled_threshold(global_scores_per_client, nu: float = 75.0) -> float:
  """tau_nu = pct_nu of the global-model scores pooled over all clients (for Eq. 2)."""
  _check_nu(nu)
  scores = np.concatenate([np.ravel(s) for s in global_scores_per_client])
  if not scores.size:
    raise ValueError('no scores to threshold: every client sent an empty score vector')
  return float(np.percentile(scores, nu))


def noise_estimate(local_scores, tau: float) -> float:
  """n^m = (1/N^m) sum_i 1[s^L_i < tau]: the fraction of local scores below tau (Eq. 2).

  The fraction below tau, as the paper's text says (docs/papers/fedln.md, ambiguity 2),
  not [code]'s fraction above it.
  """
  local_scores = np.ravel(local_scores)
  if not local_scores.size:
    raise ValueError('cannot estimate the noise of a client with no scores')
  return float(np.mean(local_scores < tau))


def _check_bin_edges(bin_edges) -> np.ndarray:
  bin_edges = np.asarray(bin_edges, dtype=np.float64)
  if bin_edges.ndim != 1 or bin_edges.size < 2 or np.any(np.diff(bin_edges) <= 0):
    raise ValueError(f'bin_edges must be at least 2 increasing values, got {bin_edges}')
  return bin_edges


def score_histogram(scores, bin_edges) -> np.ndarray:
  """Counts of a client's scores in fixed bins; scores outside go to the end bins."""
  bin_edges = _check_bin_edges(bin_edges)
  scores = np.clip(np.ravel(scores), bin_edges[0], bin_edges[-1])
  return np.histogram(scores, bins=bin_edges)[0]


def threshold_from_histograms(summed_counts, bin_edges, nu: float = 75.0) -> float:
  """tau_nu from the clients' summed histograms, linear inside the bin that holds it.

  Within one bin width of the exact pooled percentile (for scores inside the bins).
  """
  _check_nu(nu)
  bin_edges = _check_bin_edges(bin_edges)
  counts = np.asarray(summed_counts, dtype=np.float64)
  if counts.shape != (bin_edges.size - 1,) or counts.sum() <= 0:
    raise ValueError(f'need {bin_edges.size - 1} bin counts with a positive total, '
                     f'got {counts}')
  cumulative = np.cumsum(counts)
  target = nu / 100.0 * cumulative[-1]
  b = int(np.searchsorted(cumulative, target))  # First bin whose cumulative count >= target.
  below = cumulative[b] - counts[b]
  fraction = (target - below) / counts[b]
  return float(bin_edges[b] + fraction * (bin_edges[b + 1] - bin_edges[b]))


def na_fedavg_weights(estimates, num_examples) -> np.ndarray:
  """NA-FedAvg weights w_m = (1 - n^m) N^m / sum_m' (1 - n^m') N^m' (FedLN Alg. 1, l. 15).

  Equal weights if every (1 - n^m) N^m is 0.
  """
  estimates = np.asarray(estimates, dtype=np.float64)
  num_examples = np.asarray(num_examples, dtype=np.float64)
  if estimates.shape != num_examples.shape:
    raise ValueError(f'{estimates.size} noise estimates for {num_examples.size} clients')
  if np.any((estimates < 0) | (estimates > 1)):
    raise ValueError(f'noise estimates must lie in [0, 1], got {estimates}')
  return common.normalize_weights((1.0 - estimates) * num_examples)
