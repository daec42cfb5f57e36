"""The noise-robust losses the papers compare against, per example (NumPy, float64).

Each takes ``labels`` [B] (int), ``logits`` [B, C] and its parameters and returns the
per-example loss [B]; ``baseline_losses_tf`` holds the TensorFlow twins that train the
clients (the ``label_smoothing``, ``bi_tempered``, ``sce`` and ``gce`` methods).

- Label smoothing (Szegedy et al. 2016; FedLN Table 1): cross-entropy against
  (1 - s)·onehot + s/C.
- Bi-tempered logistic loss (Amid et al. 2019, Eqs. 6 and 12; FedLN Table 1): the
  tempered softmax with temperature t2 >= 1, its normaliser found by the paper's
  fixed-point iteration, scored by the Bregman divergence of the tempered log with
  temperature t1 <= 1. Smoothing follows the authors' code: (1 - C/(C-1)·s)·onehot +
  s/(C-1). t1 = t2 = 1 is cross-entropy.
- Symmetric cross-entropy (Wang et al. 2019, Eq. 6): alpha·CE + beta·RCE, where the
  reverse cross-entropy -sum_k p_k log q_k takes log 0 = A (-4 in the paper), so
  RCE = -A (1 - p_y).
- Generalized cross-entropy (Zhang & Sabuncu 2018, Eq. 6): (1 - p_y^q)/q; q -> 0 is
  cross-entropy, q = 1 the mean absolute error (up to a factor 2).
- LogitClip (Wei et al. 2023): cross-entropy on the logits clipped to p-norm at most
  tau, z · min(1, tau/||z||_p).
"""

import numpy as np
import scipy.special


def _log_softmax(logits) -> np.ndarray:
  return scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)


def _one_hot(labels, num_classes: int) -> np.ndarray:
  return np.eye(num_classes)[np.asarray(labels, np.int64)]


def label_smoothing_cross_entropy(labels, logits, smoothing: float) -> np.ndarray:
  """-sum_k t_k log p_k with t = (1 - smoothing)·onehot(y) + smoothing/C."""
  log_p = _log_softmax(logits)
  targets = (1.0 - smoothing) * _one_hot(labels, log_p.shape[-1]) + smoothing / log_p.shape[-1]
  return -np.sum(targets * log_p, axis=-1)


def log_t(u, t: float):
  """The tempered logarithm (u^(1-t) - 1)/(1 - t); log at t = 1 (Amid et al. Eq. 2)."""
  u = np.asarray(u, np.float64)
  return np.log(u) if t == 1.0 else (u ** (1.0 - t) - 1.0) / (1.0 - t)


def exp_t(u, t: float):
  """The tempered exponential [1 + (1 - t) u]_+^(1/(1-t)); exp at t = 1 (Eq. 3)."""
  u = np.asarray(u, np.float64)
  return np.exp(u) if t == 1.0 else np.maximum(1.0 + (1.0 - t) * u, 0.0) ** (1.0 / (1.0 - t))


def tempered_log_softmax(logits, t: float, num_iters: int = 5) -> np.ndarray:
  """log of the tempered softmax exp_t(a - lambda_t(a)) (Eq. 12), t >= 1, with the
  normaliser lambda_t from the paper's fixed-point iteration (its Algorithm 1)."""
  activations = np.asarray(logits, np.float64)
  if t == 1.0:
    return _log_softmax(activations)
  mu = activations.max(axis=-1, keepdims=True)
  shifted = activations - mu
  normalized = shifted
  for _ in range(num_iters):
    partition = exp_t(normalized, t).sum(axis=-1, keepdims=True)
    normalized = shifted * partition ** (1.0 - t)
  partition = exp_t(normalized, t).sum(axis=-1, keepdims=True)
  normaliser = -log_t(1.0 / partition, t) + mu
  base = 1.0 + (1.0 - t) * (activations - normaliser)  # >= 1 for t > 1: no clipping.
  return np.log(base) / (1.0 - t)


def bi_tempered_logistic_loss(labels, logits, t1: float, t2: float, smoothing: float = 0.0,
                              num_iters: int = 5) -> np.ndarray:
  """sum_k [y_k (log_t1(y_k) - log_t1(p_k)) - (y_k^(2-t1) - p_k^(2-t1))/(2 - t1)] with
  p the tempered softmax at t2 (Amid et al. 2019, Eq. 6 and 12)."""
  log_p = tempered_log_softmax(logits, t2, num_iters)
  num_classes = log_p.shape[-1]
  targets = _one_hot(labels, num_classes)
  if smoothing:
    targets = ((1.0 - num_classes / (num_classes - 1) * smoothing) * targets
               + smoothing / (num_classes - 1))
  log_t1_p = log_p if t1 == 1.0 else (np.exp((1.0 - t1) * log_p) - 1.0) / (1.0 - t1)
  first = (log_t(targets + 1e-10, t1) - log_t1_p) * targets
  second = (targets ** (2.0 - t1) - np.exp((2.0 - t1) * log_p)) / (2.0 - t1)
  return np.sum(first - second, axis=-1)


def symmetric_cross_entropy(labels, logits, alpha: float, beta: float,
                            log_zero: float = -4.0) -> np.ndarray:
  """alpha·CE + beta·RCE, RCE = -sum_k p_k log onehot_k with log 0 = ``log_zero``."""
  log_p = _log_softmax(logits)
  log_p_y = np.take_along_axis(log_p, np.asarray(labels, np.int64)[:, None], axis=-1)[:, 0]
  return alpha * -log_p_y + beta * -log_zero * (1.0 - np.exp(log_p_y))


def generalized_cross_entropy(labels, logits, q: float) -> np.ndarray:
  """(1 - p_y^q)/q."""
  log_p = _log_softmax(logits)
  log_p_y = np.take_along_axis(log_p, np.asarray(labels, np.int64)[:, None], axis=-1)[:, 0]
  return (1.0 - np.exp(q * log_p_y)) / q


def clip_logits(logits, tau: float, p: float = 2.0) -> np.ndarray:
  """z · min(1, tau/||z||_p) per row: z itself inside the p-norm ball of radius tau, else
  tau·z/||z||_p on its sphere (Wei et al. 2023's clipping operator)."""
  logits = np.asarray(logits, np.float64)
  norms = np.sum(np.abs(logits) ** p, axis=-1, keepdims=True) ** (1.0 / p)
  return logits * (tau / np.maximum(norms, tau))


def logit_clip_cross_entropy(labels, logits, tau: float, p: float = 2.0) -> np.ndarray:
  """-log softmax(clip_logits(z))_y: LogitClip on the cross-entropy (Wei et al. 2023)."""
  log_p = _log_softmax(clip_logits(logits, tau, p))
  return -np.take_along_axis(log_p, np.asarray(labels, np.int64)[:, None], axis=-1)[:, 0]
