"""FedELC's mathematics in NumPy (Jiang et al., CIKM 2024; released code
Sprinter1999/FedELC, which FNBench's ``LocalUpdateFedELC`` repeats).

FedELC is MaskedOptim's predecessor (same authors) and shares its parts; what it does
not share is pinned here, the rest is imported:

- Stage 1, rounds 1..T_w (T_w = 20, the code's ``epoch_of_stage1``), and clean clients
  after it: logit-adjusted cross-entropy (``label_distribution.logit_adjusted_cross_entropy``).
- Detection once, before round T_w + 1: ``detection.vote`` on every client's per-class
  mean loss under the global model (FedNoRo's procedure, as the code does it).
- Stage 2, noisy clients: PENCIL's loss (Yi & Wu 2019, Eq. 10) on label logits ỹ
  (y^d = softmax(ỹ), ỹ₀ = K·onehot(ŷ), K = 10), p = softmax(z):
  L_i = KL(p ‖ y^d)/C + α (−log y^d_ŷ) + β H(p)/C, α = 0.5, β = 0.2, no mask: that is
  ``label_distribution``'s ``code`` variant with ``mask=False`` (:func:`loss_args`).
  The code steps ỹ once per local epoch by the gradients of that epoch's batches,
  ỹ ← ỹ − λ G, λ = 1000 (:func:`epoch_gradient`); each example is in one batch per
  epoch, so this equals a step after each batch (MaskedOptim's) — tests hold it.
  After local training ỹ ← K (P + softmax(ỹ)) / 2 (``label_distribution.merge_label_logits``);
  no pre-merge (ζ = 1).
- Aggregation: FedAvg by examples until detection, then FedNoRo's DaAgg
  (``fednoro.daagg_weights``; a round with no clean or no noisy client weighs by
  examples, as the code's FedAvg fallback): :func:`aggregation_weights`.
"""

import numpy as np

from tff_noisy.ops import common
from tff_noisy.ops import fednoro
from tff_noisy.ops import label_distribution

WARMUP_ROUNDS = 20  # T_w: detection runs before round T_w + 1 (``epoch_of_stage1``).
ALPHA = 0.5  # α, the compatibility weight (``alpha_pencil``).
BETA = 0.2  # β, the entropy weight (``beta_pencil``; MaskedOptim's code has 0.1).
LABEL_LR = 1000.0  # λ, the label logits' step (``lamda_pencil``).
LABEL_SCALE = label_distribution.LABEL_SCALE  # K = 10 (``K_pencil``).
BEFORE_DETECTION = 'before detection: weights by examples'


def loss_args(alpha: float = ALPHA, beta: float = BETA) -> dict:
  """Keyword arguments of ``label_distribution(_tf).label_distribution_loss`` that give
  FedELC's stage-2 loss (PENCIL's Eq. 10 as the released ``pencil_loss``)."""
  return dict(alpha=float(alpha), beta=float(beta), mask=False, variant='code')


def fedelc_loss(logits, label_logits, labels, alpha: float = ALPHA,
                beta: float = BETA) -> np.ndarray:
  """KL(p ‖ y^d)/C + α (−log y^d_ŷ) + β H(p)/C per example [B] (module doc)."""
  return label_distribution.label_distribution_loss(logits, label_logits, labels,
                                                    **loss_args(alpha, beta))


def label_gradient(logits, label_logits, labels, alpha: float = ALPHA) -> np.ndarray:
  """∇_ỹ of the batch-mean loss [B, C]: ((y^d − p)/C + α (y^d − e_ŷ)) / |B|."""
  return label_distribution.label_logits_gradient(logits, label_logits, labels,
                                                  alpha=alpha, mask=False, variant='code')


def epoch_gradient(num_rows: int, num_classes: int, batch_rows, batch_gradients) -> np.ndarray:
  """G [n, C] of one local epoch, as the code builds it: zeros, then each batch's rows
  set to that batch's gradient (a row seen twice keeps the later one; rows of the
  dropped last batch stay 0)."""
  total = np.zeros((num_rows, num_classes))
  for rows, gradient in zip(batch_rows, batch_gradients):
    total[np.asarray(rows, np.int64)] = gradient
  return total


def aggregation_weights(sizes, noisy, updates, detected: bool) -> fednoro.DaAgg:
  """The round's client weights: by examples before detection, DaAgg after it."""
  if not detected:
    sizes = np.asarray(sizes, np.float64)
    return fednoro.DaAgg(common.normalize_weights(sizes), np.zeros(len(sizes)),
                         BEFORE_DETECTION)
  return fednoro.daagg_weights(sizes, noisy, updates)
