"""FedDiv's maths in NumPy (Li et al., AAAI 2024, "FedDiv: Collaborative Noise Filtering
for Federated Learning with Noisy Labels"; released code lijichang/FLNL-FedDiv, commit
918624c7, ``code release/main.py``, ``server.py``, ``gmm.py``). No paper text was read:
every rule below is the released code's.

- A noise filter is a two-component 1-D GMM on a client's per-example losses min-max
  scaled to [0, 1] (``calculate_normalized_loss``), held as an array [3, 2]: rows the
  mixing weights π, the means μ and the variances σ² of the two components.
- Local filter (``local_filter_training``): ``iterations`` EM steps on the client's
  scaled losses from the global filter's parameters (the code's 3 calls of a one-step
  sklearn fit warm-started from the global model); an EM step is sklearn's: E-step
  r_ij ∝ π_j N(x_i | μ_j, σ²_j), then n_j = Σ_i r_ij + 10·eps, μ_j = Σ_i r_ij x_i / n_j,
  σ²_j = Σ_i r_ij (x_i − μ_j)² / n_j + 1e-6, π_j = n_j / n.
- Global filter (``federated_filter_aggregation``, ``Server.weighted_average_clients_models``):
  over the latest local filter of every client cached so far, γ_k = n_k / Σ n, then
  π = Σ γ_k π_k, μ = Σ γ_k μ_k and σ² = Σ γ_k² σ²_k (the code's squared weights on the
  covariances).
- Split (``local_data_splitting``): an example is clean when the global filter's
  posterior of its smaller-mean component exceeds 0.5; the estimated noise level is the
  share of the others.
- De-biasing (``causal_inference``, ``client_cached_phat_update``): the local model's
  probabilities p, de-biased by the client's running class prior p̂, softmax(log p −
  ξ log p̂); its argmax is the example's de-biased label; p̂ ← m p̂ + (1 − m) mean of p
  over the examples whose largest de-biased probability exceeds 0.85.
- Relabelling and re-selection with the predictive-consistency sampler
  (``relabeling_and_reselection``, ``predictive_consistency_sampling``): ``select``.
- The filter's loss (``get_output``): the code applies cross-entropy to the softmax
  outputs, −p_y + log Σ_c exp(p_c) (``softmax_cross_entropy``); −log p_y is the option
  ``cross_entropy``.
"""

from typing import NamedTuple

import numpy as np
import scipy.special

from tff_noisy.ops import common
from tff_noisy.ops import dividemix

REG_COVAR = 1e-6  # sklearn's default, which the code's GaussianMixture keeps.
WEIGHTS, MEANS, VARIANCES = 0, 1, 2  # The rows of a filter [3, 2].
# The global filter before any client fitted one: equal weights, means 1/4 and 3/4 and
# the variance of a uniform loss on [0, 1] (1/12), so the first split is at 1/2. The code
# starts from sklearn's random responsibilities on a synthetic two-blob set instead.
INITIAL_FILTER = np.array([[0.5, 0.5], [0.25, 0.75], [1 / 12, 1 / 12]])
LOSSES = ('softmax_cross_entropy', 'cross_entropy')


def filter_losses(probs, labels, kind: str = 'softmax_cross_entropy') -> np.ndarray:
  """The per-example loss [n] the filters see, from probabilities ``probs`` [n, C]:
  ``softmax_cross_entropy`` −p_y + log Σ_c exp(p_c) (the code's CE on softmax outputs),
  ``cross_entropy`` −log p_y (at most −log of the smallest float64)."""
  probs = np.asarray(probs, np.float64)
  labels = common.check_labels(labels, probs.shape[1])
  picked = np.take_along_axis(probs, labels[:, None], axis=1)[:, 0]
  if kind == 'softmax_cross_entropy':
    return scipy.special.logsumexp(probs, axis=1) - picked
  if kind == 'cross_entropy':
    return -np.log(np.maximum(picked, np.finfo(np.float64).tiny))
  raise ValueError(f'filter loss {kind!r}: expected one of {", ".join(LOSSES)}')


def scaled_losses(losses) -> np.ndarray:
  """Losses min-max scaled to [0, 1] (``calculate_normalized_loss``); all equal: zeros."""
  return dividemix.normalized_losses(losses)


def posterior(x, noise_filter) -> np.ndarray:
  """r [n, 2]: each component's posterior of the scaled losses ``x`` [n] under a filter."""
  x = np.asarray(x, np.float64)
  weights, means, variances = np.asarray(noise_filter, np.float64)
  log_prob = np.log(weights) - 0.5 * (np.log(2 * np.pi * variances)
                                      + (x[:, None] - means) ** 2 / variances)
  return np.exp(log_prob - scipy.special.logsumexp(log_prob, axis=1, keepdims=True))


def em_step(x, noise_filter, reg_covar: float = REG_COVAR) -> np.ndarray:
  """One EM step of sklearn's GMM on ``x`` [n] from ``noise_filter`` (module doc)."""
  x = np.asarray(x, np.float64)
  resp = posterior(x, noise_filter)
  counts = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
  means = resp.T @ x / counts
  variances = (resp * (x[:, None] - means) ** 2).sum(axis=0) / counts + reg_covar
  return np.stack([counts / len(x), means, variances])


def local_filter(x, global_filter, iterations: int = 3) -> np.ndarray:
  """A client's local filter: ``iterations`` EM steps on its scaled losses ``x`` from the
  global filter (``local_filter_training``)."""
  noise_filter = np.asarray(global_filter, np.float64)
  for _ in range(int(iterations)):
    noise_filter = em_step(x, noise_filter)
  return noise_filter


def aggregate_filters(filters, sizes) -> np.ndarray:
  """The global filter [3, 2] from local ``filters`` [K, 3, 2] of clients of ``sizes``
  [K]: γ-weighted weights and means, γ²-weighted variances (module doc)."""
  filters = np.asarray(filters, np.float64)
  gamma = np.asarray(sizes, np.float64) / np.sum(sizes)
  powers = np.array([1.0, 1.0, 2.0])[None, :, None]  # γ, γ, γ² on the three rows.
  return np.sum(gamma[:, None, None] ** powers * filters, axis=0)


class Split(NamedTuple):
  clean: np.ndarray  # bool [n]: predicted clean.
  noise_level: float  # The share predicted noisy.


def split(x, global_filter, threshold: float = 0.5) -> Split:
  """Clean where the posterior of the smaller-mean component exceeds ``threshold``
  (``local_data_splitting``); the estimated noise level 1 − (share clean)."""
  noise_filter = np.asarray(global_filter, np.float64)
  clean = posterior(x, noise_filter)[:, int(np.argmin(noise_filter[MEANS]))] > threshold
  return Split(clean, float(1.0 - clean.mean()) if len(clean) else 0.0)


def debiased_probabilities(probs, prior, xi: float) -> np.ndarray:
  """softmax(log p − ξ log p̂) [n, C] (``causal_inference``; the code subtracts from the
  logits, the same up to each row's constant)."""
  logp = np.log(np.maximum(np.asarray(probs, np.float64), np.finfo(np.float64).tiny))
  return scipy.special.softmax(logp - xi * np.log(np.asarray(prior, np.float64)), axis=1)


def update_prior(probs, debiased, prior, momentum: float,
                 confidence: float = 0.85) -> np.ndarray:
  """p̂ ← m p̂ + (1 − m)·mean of ``probs`` over the examples whose largest ``debiased``
  probability exceeds ``confidence``; unchanged when there is none (``update_phat``)."""
  prior = np.asarray(prior, np.float64)
  confident = np.asarray(debiased, np.float64).max(axis=1) > confidence
  if not confident.any():
    return prior
  return momentum * prior + (1.0 - momentum) * np.asarray(probs, np.float64)[confident].mean(0)


class Selection(NamedTuple):
  labels: np.ndarray  # The client's labels from now on [n].
  kept: np.ndarray  # Sorted positions of the examples it trains on this round.
  relabelled: np.ndarray  # Positions given the global model's label (it may equal the old).
  consistent_clean: np.ndarray  # Positions of the clean ones the sampler keeps.


def select(labels, global_probs, clean, noise_level: float, debiased_labels, visits: int,
           *, confidence: float = 0.0, clean_set_threshold: float = 0.1,
           relabel_threshold: float = 0.2, sampler_start: int = 5) -> Selection:
  """Relabelling and re-selection (``relabeling_and_reselection``) of a client whose
  examples the global filter split into ``clean`` [n] (bool) and noisy at ``noise_level``,
  from the global model's ``global_probs`` [n, C] and the de-biased labels of its last
  local model (at its first visit the global model's argmax).

  ŷ = argmax of the global model. The sampler keeps the clean examples with ŷ equal to
  the de-biased label; the noisy examples whose largest global probability exceeds
  ``confidence`` and whose ŷ equals the de-biased label take ŷ as their label. The client
  trains on: every example with its labels unchanged when its noise level is at most
  ``clean_set_threshold``; else on the clean set in its first ``sampler_start`` visits,
  later the sampler's clean set and, when the noise level exceeds ``relabel_threshold``,
  the relabelled examples too; the relabelled labels are kept (above
  ``clean_set_threshold``) whether it trains on them or not."""
  labels = np.asarray(labels).copy()
  probs = np.asarray(global_probs, np.float64)
  clean = np.asarray(clean, bool)
  pseudo = np.argmax(probs, axis=1)
  agree = pseudo == np.asarray(debiased_labels).astype(pseudo.dtype)
  consistent_clean = np.flatnonzero(clean & agree)
  relabelled = np.flatnonzero(~clean & (probs.max(axis=1) > confidence) & agree)
  everything = np.arange(len(labels))
  if noise_level <= clean_set_threshold:
    return Selection(labels, everything, relabelled[:0], consistent_clean)
  labels[relabelled] = pseudo[relabelled]
  if visits < sampler_start:
    kept = np.flatnonzero(clean)
  elif noise_level > relabel_threshold:
    kept = np.union1d(consistent_clean, relabelled)
  else:
    kept = consistent_clean
  return Selection(labels, kept, relabelled, consistent_clean)
