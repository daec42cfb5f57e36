"""Joint Optimization (Tanaka et al. 2018): training on per-example soft labels that the
network's own averaged predictions rewrite, NumPy.

The loss of a mini-batch of B examples with soft labels y_j and softmax outputs s_j:

  L = L_c + α·L_p + β·L_e,
  L_c = -1/B Σ_j Σ_c y_jc log s_jc          (the cross-entropy against the soft labels),
  L_p = Σ_c p_c log(p_c / s̄_c),  s̄ = 1/B Σ_j s_j   (the prior term, s̄ over the batch),
  L_e = -1/B Σ_j Σ_c s_jc log s_jc          (the entropy term).

The paper writes L_c as KL(y_j ‖ s_j), which is the cross-entropy minus H(y_j), a constant
of the step; both codes (the authors' and FNBench's) take the cross-entropy, as here. Both
codes take -Σ_c p_c log s̄_c for L_p, which is the KL above plus H(p), again a constant;
this gives the KL (0 when s̄ = p). p is uniform in both codes.

The label update (the paper's alternating step on Y with θ fixed) replaces y_j by the
mean of the last q softmax outputs of example j (the authors' code: "the average output
probability of the network of the past 10 epochs", q = 10; FNBench: q = 15), or its
one-hot argmax for hard labels. Both codes keep the outputs in a ring buffer that starts
at 0 and divide by q however few were written (``divide_by_filled`` False); True divides by
the written slots min(count, q).

State per client (``init_state``): ``labels`` float32 [n, C] (one-hot of the observed
labels until the first update), ``history`` float32 [n, q, C], ``count`` int32 [n]. The
functions take a batch's rows (or all n rows). ``joint_optim_tf`` holds the TensorFlow twin
the clients train with.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import common


def init_state(observed_labels, num_classes: int, queue_size: int) -> tuple:
  """``(labels, history, count)`` of a client whose observed labels are ``observed_labels``."""
  observed = common.check_labels(observed_labels, num_classes)
  labels = np.eye(num_classes, dtype=np.float32)[observed]
  return (labels, np.zeros((len(observed), queue_size, num_classes), np.float32),
          np.zeros(len(observed), np.int32))


def label_updates_active(round_num: int, warmup_rounds: int) -> bool:
  """Whether round T = 1, 2, ... updates labels: T > T_w (FNBench's ``g_epoch >=
  warmup_epochs`` with 0-based rounds, T_w = ⌊0.2·rounds⌋; the authors' code: epoch
  ``begin`` = 70 of 200)."""
  return round_num > warmup_rounds


def uniform_prior(num_classes: int) -> np.ndarray:
  return np.full(num_classes, 1.0 / num_classes)


def classification_loss(soft_labels, logits) -> np.ndarray:
  """-Σ_c y_jc log s_jc [B] (Tanaka et al. 2018, L_c as the codes compute it)."""
  log_s = scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)
  return -np.sum(np.asarray(soft_labels, np.float64) * log_s, axis=-1)


def prior_loss(logits, prior=None) -> float:
  """L_p = Σ_c p_c log(p_c / s̄_c), s̄ the batch mean of the softmax outputs (Tanaka et al.
  2018, the prior regulariser with s̄ over the mini-batch); p uniform by default."""
  s_bar = scipy.special.softmax(np.asarray(logits, np.float64), axis=-1).mean(axis=0)
  prior = uniform_prior(len(s_bar)) if prior is None else _check_prior(prior, len(s_bar))
  return float(np.sum(scipy.special.xlogy(prior, prior) - scipy.special.xlogy(prior, s_bar)))


def entropy_loss(logits) -> np.ndarray:
  """-Σ_c s_jc log s_jc [B] (Tanaka et al. 2018, L_e per example)."""
  log_s = scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)
  return -np.sum(np.exp(log_s) * log_s, axis=-1)


def joint_loss(soft_labels, logits, alpha: float, beta: float, prior=None) -> np.ndarray:
  """ℓ_j = CE_j + α·L_p + β·H_j [B]: its batch mean is L = L_c + α L_p + β L_e (Tanaka et
  al. 2018, the loss of the step on θ with Y fixed). L_p couples the batch: not stackable."""
  return (classification_loss(soft_labels, logits) + alpha * prior_loss(logits, prior)
          + beta * entropy_loss(logits))


def update_history(history, count, probabilities) -> tuple:
  """``(history, count)`` rows after writing ``probabilities`` [B, C] at slot count mod q."""
  history = np.array(history, np.float32)
  count = np.asarray(count, np.int32)
  history[np.arange(len(count)), count % history.shape[1]] = probabilities
  return history, count + 1


def updated_labels(history, count, labels, hard: bool = False,
                   divide_by_filled: bool = False) -> np.ndarray:
  """New label rows [B, C]: the mean of the history's slots (soft, the paper's soft-label
  update with the codes' average over the last q outputs) or its one-hot argmax (hard,
  ties: the smaller class); rows with nothing written keep ``labels``."""
  history = np.asarray(history, np.float64)
  count = np.asarray(count)
  queue = history.shape[1]
  written = np.minimum(count, queue) if divide_by_filled else np.full(count.shape, queue)
  soft = history.sum(axis=1) / np.maximum(written, 1)[:, None]
  if hard:
    soft = np.eye(history.shape[2])[np.argmax(soft, axis=1)]
  return np.where((count > 0)[:, None], soft, np.asarray(labels, np.float64)).astype(np.float32)


def label_report(labels, true_labels, observed_labels) -> dict:
  """Scores the argmax of the labels against the truth (reporting only): the fraction
  right, of the flipped examples (observed ≠ true) the fraction corrected, and of the
  others the fraction still right."""
  estimate = np.argmax(np.asarray(labels), axis=1)
  true_labels, observed = np.asarray(true_labels), np.asarray(observed_labels)
  right = estimate == true_labels
  flipped = observed != true_labels
  return {
      'accuracy': float(right.mean()),
      'flips_corrected': float(right[flipped].mean()) if flipped.any() else float('nan'),
      'clean_kept': float(right[~flipped].mean()) if (~flipped).any() else float('nan'),
  }


def _check_prior(prior, num_classes: int) -> np.ndarray:
  prior = np.asarray(prior, np.float64)
  if prior.shape != (num_classes,) or np.any(prior < 0) or not np.isclose(prior.sum(), 1.0):
    raise ValueError(f'prior must be {num_classes} non-negative numbers summing to 1, '
                     f'got {prior}')
  return prior
