"""Early-Learning Regularization (Liu et al., NeurIPS 2020), NumPy.

Every example i keeps a target t_i (C probabilities, 0 before its first visit). At each
visit the model's softmax p_i is clamped to [ε, 1 − ε] (ε = 1e-4) and the target moves
towards it, renormalised (Eq. 9, the temporal ensembling of the authors' code):

  t_i ← β·t_i + (1 − β)·p̂_i,   p̂_i = clamp(p_i) / Σ_c clamp(p_i)_c,

and the step trains on the cross-entropy of the observed label plus the regulariser of
the updated target (Eq. 7):

  ℓ_i = CE(y_i, p_i) + λ·log(1 − ⟨t_i, clamp(p_i)⟩).

The authors' code (``ELR/model/loss.py``) updates the target before the loss reads it and
keeps it fixed in the gradient (only clamp(p_i) carries it; the clamp passes no gradient
outside [ε, 1 − ε]). ``elr_tf`` holds the TensorFlow twin the clients train with.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import common

CLAMP = 1e-4  # ε of the authors' code: the softmax is clamped to [ε, 1 − ε].


def initial_targets(num_examples: int, num_classes: int) -> np.ndarray:
  """t = 0 [n, C] float32 (the authors' ``torch.zeros(num_examp, num_classes)``)."""
  return np.zeros((int(num_examples), int(num_classes)), np.float32)


def clamped_probabilities(logits, eps: float = CLAMP) -> np.ndarray:
  """clamp(softmax(logits), ε, 1 − ε) [B, C], float64 (not renormalised)."""
  probs = scipy.special.softmax(np.asarray(logits, np.float64), axis=-1)
  return np.clip(probs, eps, 1.0 - eps)


def updated_targets(targets, logits, beta: float, eps: float = CLAMP) -> np.ndarray:
  """β·t + (1 − β)·p̂ [B, C], p̂ the clamped softmax renormalised (Eq. 9)."""
  clamped = clamped_probabilities(logits, eps)
  normalised = clamped / clamped.sum(axis=-1, keepdims=True)
  return beta * np.asarray(targets, np.float64) + (1.0 - beta) * normalised


def regulariser(targets, logits, eps: float = CLAMP) -> np.ndarray:
  """log(1 − ⟨t_i, clamp(p_i)⟩) [B] (Eq. 7's regulariser, per example)."""
  inner = np.sum(np.asarray(targets, np.float64) * clamped_probabilities(logits, eps), axis=-1)
  return np.log1p(-inner)


def elr_loss(labels, logits, targets, lam: float, eps: float = CLAMP) -> np.ndarray:
  """CE(y_i, p_i) + λ·log(1 − ⟨t_i, clamp(p_i)⟩) [B] with the already updated ``targets``
  (Eq. 7; its batch mean is the authors' ``ce_loss + lambda * elr_reg``)."""
  logits = np.asarray(logits, np.float64)
  labels = common.check_labels(labels, logits.shape[-1])
  log_p = scipy.special.log_softmax(logits, axis=-1)
  ce = -log_p[np.arange(len(labels)), labels]
  return ce + lam * regulariser(targets, logits, eps)
