"""Dawid-Skene EM with clients as annotators: FedDS reliabilities (Dong et al. 2026).

Client j's hard predictions y_i^(j) on an unlabelled public set of N samples are the
votes of a noisy annotator with confusion matrix M^(j), m_{c,l} = P(y^(j) = l | T = c).
EM estimates every M^(j), the class prior p and the posteriors Q_i(c) (FedDS §3.3;
docs/papers/fedds.md). Each step is written once, so a federated EM, in which the server
never sees a prediction, runs the same arithmetic as :func:`dawid_skene`:

  init    clients: ``majority_vote_init_counts``; sum; server: ``majority_vote_posteriors``
  M-step  clients: ``local_m_step`` (Eq. 10); server: ``class_log_prior`` (Eq. 11)
  E-step  clients: ``local_log_likelihood_terms``; sum; server: ``e_step_from_terms`` (Eq. 9)

:func:`dawid_skene` runs the client steps for all clients at once, with a sparse [J*C, N]
one-hot matrix of the votes; the sum over clients is part of its matrix product.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse

from tff_noisy.ops import common

EPSILON = 1e-10  # Inside every log, and added to the majority-vote posteriors ([code]).


class DawidSkeneResult(NamedTuple):
  confusion: np.ndarray  # [J, C, C] float64; row c of client j is P(y^(j) = . | T = c).
  priors: np.ndarray  # [C] class prior p used in the last E-step (+1e-10).
  posteriors: np.ndarray  # [N, C] Q_i(c).
  reliability: np.ndarray  # [J] mean diagonal of each confusion matrix (Eq. 7).
  log_likelihood: np.ndarray  # [iterations] l (Eq. 14) at each E-step; never decreases (Eq. 15).
  iterations: int


def _safe_log(x):
  return np.log(x + EPSILON)


def _votes(predictions: np.ndarray, num_classes: int) -> scipy.sparse.csr_matrix:
  """One-hot votes of J clients as a sparse [J*C, N] matrix: row j*C + y_i^(j), column i."""
  num_clients, num_samples = predictions.shape
  rows = (np.arange(num_clients)[:, None] * num_classes + predictions).ravel()
  columns = np.tile(np.arange(num_samples), num_clients)
  return scipy.sparse.csr_matrix(
      (np.ones(rows.size), (rows, columns)), shape=(num_clients * num_classes, num_samples))


def _m_step(votes, posteriors: np.ndarray, smoothing: float) -> np.ndarray:
  """Eq. 10 for all clients: m_{c,l} = (sum_i Q_i(c) 1[y_i = l] + alpha) / row total."""
  num_classes = posteriors.shape[1]
  counts = (votes @ posteriors).reshape(-1, num_classes, num_classes).transpose(0, 2, 1)
  counts = counts + smoothing
  totals = counts.sum(axis=-1, keepdims=True)
  # A class with no posterior mass keeps an all-zero row ([code]); log(0 + eps) handles it.
  return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def _log_terms(votes, confusion: np.ndarray) -> np.ndarray:
  """sum_j log(m^(j)_{c, y_i^(j)} + eps) as [N, C]: the clients' part of Eq. 9's numerator."""
  num_classes = confusion.shape[-1]
  log_confusion = _safe_log(confusion).transpose(0, 2, 1).reshape(-1, num_classes)
  return np.asarray(votes.T @ log_confusion)


def majority_vote_init_counts(client_predictions, num_classes: int) -> np.ndarray:
  """One-hot [..., N, C] of a client's votes; their sum over clients seeds EM ([code])."""
  return np.eye(num_classes)[common.check_labels(client_predictions, num_classes, 'prediction')]


def majority_vote_posteriors(summed_counts) -> np.ndarray:
  """Q^(0)_i(c) = (1/J) sum_j 1[y_i^(j) = c] + 1e-10, renormalised (FedDS's released code)."""
  counts = np.asarray(summed_counts, dtype=np.float64)
  posteriors = counts / counts.sum(axis=1, keepdims=True) + EPSILON
  return posteriors / posteriors.sum(axis=1, keepdims=True)


def local_m_step(client_predictions, posteriors, num_classes: int,
                 smoothing: float = 0.0) -> np.ndarray:
  """One client's M-step (Eq. 10): its [C, C] confusion matrix from its [N] votes."""
  predictions = common.check_labels(client_predictions, num_classes, 'prediction')
  votes = _votes(predictions[None], num_classes)
  return _m_step(votes, np.asarray(posteriors, dtype=np.float64), smoothing)[0]


def local_log_likelihood_terms(client_predictions, confusion) -> np.ndarray:
  """One client's E-step terms log(m_{c, y_i} + eps) as [N, C], for a federated sum."""
  confusion = np.asarray(confusion, dtype=np.float64)
  predictions = common.check_labels(client_predictions, confusion.shape[-1], 'prediction')
  return _log_terms(_votes(predictions[None], confusion.shape[-1]), confusion[None])


def class_log_prior(posteriors, use_prior: bool = True) -> np.ndarray:
  """log p_c with p_c = (1/N) sum_i Q_i(c) (Eq. 11), or a uniform prior ([code], ds_use_prior)."""
  posteriors = np.asarray(posteriors, dtype=np.float64)
  if not use_prior:
    return np.full(posteriors.shape[1], -np.log(posteriors.shape[1]))
  return _safe_log(posteriors.mean(axis=0))


def e_step_from_terms(sum_terms, log_prior):
  """Server E-step (Eq. 9 in log space): returns (posteriors [N, C], l of Eq. 14).

  log Q_i(c) = log p_c + sum_j log m^(j)_{c, y_i^(j)} - LSE_c(.), and
  l = sum_i LSE_c(log p_c + sum_j log m^(j)_{c, y_i^(j)}).
  """
  joint = np.asarray(sum_terms, dtype=np.float64) + log_prior
  peak = joint.max(axis=1, keepdims=True)
  log_normaliser = peak + np.log(np.exp(joint - peak).sum(axis=1, keepdims=True))
  return np.exp(joint - log_normaliser), float(log_normaliser.sum())


def client_reliability(confusion) -> np.ndarray:
  """w_DS^(j) = (1/C) sum_c m^(j)_{c,c}, the mean diagonal (Eq. 7); [..., C, C] -> [...]."""
  return np.diagonal(np.asarray(confusion), axis1=-2, axis2=-1).mean(axis=-1)


def reliability_weights(reliability) -> np.ndarray:
  """FedDS aggregation weights w^(j) = r_j / sum_l r_l (Eq. 8); equal if all are 0 ([code])."""
  return common.normalize_weights(reliability)


def dawid_skene(predictions, num_classes: int, max_iter: int = 500, tol: float = 1e-5,
                prior: bool = True, smoothing: float = 0.0) -> DawidSkeneResult:
  """Fits the Dawid-Skene model to [J, N] hard predictions by EM (FedDS §3.3).

  Starts from the soft majority vote, then alternates M- and E-steps until the largest
  change of a posterior is below ``tol`` or after ``max_iter`` E-steps ([code]).
  ``prior=False`` uses a uniform prior; ``smoothing`` is Laplace smoothing of the M-step
  counts (``ds_alpha``). Float64 throughout.
  """
  predictions = common.check_labels(predictions, num_classes, 'prediction')
  if predictions.ndim != 2 or predictions.shape[0] < 1:
    raise ValueError(f'predictions must have shape [J >= 1 clients, N samples], '
                     f'got {predictions.shape}')
  if predictions.shape[1] == 0:
    raise ValueError('the public set has size 0: there is nothing to fit')
  if max_iter < 1 or tol < 0 or smoothing < 0:
    raise ValueError(f'need max_iter >= 1, tol >= 0 and smoothing >= 0, got '
                     f'max_iter={max_iter}, tol={tol}, smoothing={smoothing}')
  votes = _votes(predictions, num_classes)
  posteriors = majority_vote_posteriors(
      majority_vote_init_counts(predictions, num_classes).sum(axis=0))
  log_likelihood = []
  for _ in range(max_iter):
    confusion = _m_step(votes, posteriors, smoothing)
    log_prior = class_log_prior(posteriors, prior)
    new_posteriors, ll = e_step_from_terms(_log_terms(votes, confusion), log_prior)
    log_likelihood.append(ll)
    change = np.abs(new_posteriors - posteriors).max()
    posteriors = new_posteriors
    if change < tol:
      break
  return DawidSkeneResult(
      confusion=confusion,
      priors=np.exp(log_prior),
      posteriors=posteriors,
      reliability=client_reliability(confusion),
      log_likelihood=np.array(log_likelihood),
      iterations=len(log_likelihood))
