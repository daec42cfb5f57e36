"""Mixup (Zhang et al., ICLR 2018, Eq. 1) in NumPy, as FedCorr's released code runs it in
every local step (``util/local_training.py``'s ``mixup_data`` and ``mixup_criterion``):
a batch's inputs mixed with a permutation of themselves, x̃ = λ x + (1 − λ) x_π, with
λ ~ Beta(α, α) drawn once per batch, and the loss λ CE(f(x̃), y) + (1 − λ) CE(f(x̃), y_π).
Its TensorFlow twin, which the clients run, is ``mixup_tf``.
"""

import numpy as np


def mix(x, lam: float, permutation) -> np.ndarray:
  """λ x + (1 − λ) x[π] over the batch axis."""
  x = np.asarray(x, np.float64)
  return lam * x + (1.0 - lam) * x[np.asarray(permutation)]


def mixed_cross_entropy(logits, labels, permutation, lam: float) -> np.ndarray:
  """Per-example λ CE(logits, y) + (1 − λ) CE(logits, y[π])."""
  logits = np.asarray(logits, np.float64)
  labels = np.asarray(labels)
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  rows = np.arange(len(labels))
  partners = labels[np.asarray(permutation)]
  return -(lam * log_probs[rows, labels] + (1.0 - lam) * log_probs[rows, partners])
