"""SELFIE: refurbishing unclean samples by their prediction history (Song et al. 2019,
Algorithm 1), NumPy.

Each client keeps, per local example, the classes its model predicted the last q times it
trained on the example (a ring buffer), and the label the example was last refurbished to.
In every mini-batch of B examples after warm-up:

- the history takes this step's predictions (argmax of the logits) first (FNBench's order;
  the authors' code appends them after the selection);
- the label distribution of the history P(y | x; q) = #{slots = y} / q, its predictive
  uncertainty F(x; q) = -Σ_y P log P / log C in [0, 1], and an example with F ≤ ε is
  refurbished to the history's mode (the authors' code: Algorithm 1, lines 12-19); an
  example refurbished once keeps its last refurbished label (the code's "reuse
  previously classified refurbishable samples");
- the clean set is the ⌈(1 - τ)·B⌉ examples of smallest cross-entropy against their
  observed labels; the step's loss is the mean cross-entropy over clean ∪ refurbished,
  a refurbished example scored against its refurbished label.

Warm-up batches train on the plain cross-entropy and still fill the history.

State per client (``init_state``): ``history`` int32 [n, q] (0 before a slot is written,
as both codes), ``count`` int32 [n] (predictions written so far; the next slot is
count mod q), ``refurbished`` int32 [n] (-1: never). The functions below take a batch's
rows of it. ``count_empty_slots``: True (both codes) divides by q with unwritten slots
counted as class 0; False divides by the written slots min(count, q), |H_x(q)| as the
paper writes it. Ties of the mode: the smallest class (the authors' ``np.argmax``).
``selfie_tf`` holds the TensorFlow twin the clients train with.
"""

import math

import numpy as np
import scipy.special

from tff_noisy.ops import coteaching

NOT_REFURBISHED = -1


def init_state(num_examples: int, queue_size: int) -> tuple:
  """``(history, count, refurbished)`` of a client with ``num_examples`` examples."""
  return (np.zeros((num_examples, queue_size), np.int32), np.zeros(num_examples, np.int32),
          np.full(num_examples, NOT_REFURBISHED, np.int32))


def refurbishing_active(round_num: int, warmup_rounds: int) -> bool:
  """Whether round T = 1, 2, ... refurbishes: T > T_w (FNBench's ``g_epoch >=
  warmup_epochs`` with 0-based rounds, T_w = ⌊0.2·rounds⌋)."""
  return round_num > warmup_rounds


def update_history(history, count, predictions) -> tuple:
  """``(history, count)`` rows after writing ``predictions`` [B] at slot count mod q (the
  label history H_x(q) of Song et al. 2019, §3; the authors' ``async_update``)."""
  history = np.array(history, np.int32)
  count = np.asarray(count, np.int32)
  rows = np.arange(len(count))
  history[rows, count % history.shape[1]] = predictions
  return history, count + 1


def _written(history, count, count_empty_slots: bool) -> np.ndarray:
  """bool [B, q]: the slots that vote."""
  slots = np.arange(history.shape[1])[None, :]
  if count_empty_slots:
    return np.ones(history.shape, bool)
  return slots < np.minimum(np.asarray(count), history.shape[1])[:, None]


def label_distribution(history, count, num_classes: int,
                       count_empty_slots: bool = True) -> np.ndarray:
  """P(y | x; q) [B, C] (module doc); all 0 for a row with no voting slot."""
  history = np.asarray(history)
  votes = _written(history, count, count_empty_slots)
  counts = (np.eye(num_classes)[history] * votes[..., None]).sum(axis=1)
  total = votes.sum(axis=1, keepdims=True)
  return np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)


def uncertainty(history, count, num_classes: int, count_empty_slots: bool = True) -> np.ndarray:
  """F(x; q) = -Σ_y P(y|x;q) log P(y|x;q) / log C [B] (Song et al. 2019, the predictive
  uncertainty); 1 for a row with no voting slot."""
  if num_classes < 2:
    raise ValueError(f'uncertainty needs num_classes >= 2, got {num_classes}')
  probs = label_distribution(history, count, num_classes, count_empty_slots)
  entropy = -scipy.special.xlogy(probs, probs).sum(axis=1) / np.log(num_classes)
  return np.where(probs.sum(axis=1) > 0, entropy, 1.0)


def history_mode(history, count, num_classes: int, count_empty_slots: bool = True) -> np.ndarray:
  """argmax_y P(y | x; q) [B], the refurbished label (ties: the smallest class)."""
  return np.argmax(label_distribution(history, count, num_classes, count_empty_slots), axis=1)


def refurbish(history, count, refurbished, num_classes: int, threshold: float,
              count_empty_slots: bool = True) -> np.ndarray:
  """``refurbished`` rows after Algorithm 1's refurbishable test: rows with a written
  history and F ≤ ε take the history's mode, the others keep theirs (-1 or earlier)."""
  count = np.asarray(count)
  now = (count > 0) & (uncertainty(history, count, num_classes, count_empty_slots)
                       <= threshold)
  mode = history_mode(history, count, num_classes, count_empty_slots)
  return np.where(now, mode, np.asarray(refurbished)).astype(np.int32)


def num_clean(batch_size: int, noise_rate: float) -> int:
  """⌈(1 - τ)·B⌉ (Song et al. 2019, the clean subset of the mini-batch), in float64 from the
  Python float τ as FNBench and the authors' code compute it."""
  return int(math.ceil(float(batch_size) * (1.0 - float(noise_rate))))


def loss_mask_and_targets(labels, losses, refurbished, noise_rate: float) -> tuple:
  """``(mask, targets)`` [B]: clean (the ⌈(1 - τ)B⌉ smallest ``losses``, cross-entropies
  against the observed labels; ties: the earlier example) ∪ refurbished, and each
  example's target (its refurbished label, else its observed one)."""
  refurbished = np.asarray(refurbished)
  clean = coteaching.small_loss_mask(losses, num_clean(len(refurbished), noise_rate))
  mask = clean | (refurbished != NOT_REFURBISHED)
  targets = np.where(refurbished != NOT_REFURBISHED, refurbished, np.asarray(labels))
  return mask, targets.astype(np.int64)


def selfie_loss(labels, logits, refurbished, noise_rate: float) -> np.ndarray:
  """ℓ_j = (B/k)·m_j·CE(z_j, ỹ_j) [B], k = Σ m: its batch mean is the mean cross-entropy
  over clean ∪ refurbished (Algorithm 1, the update on the refurbished and clean samples)."""
  mask, targets = loss_mask_and_targets(labels, coteaching.cross_entropy(labels, logits),
                                        refurbished, noise_rate)
  return len(mask) / max(int(mask.sum()), 1) * mask * coteaching.cross_entropy(targets, logits)


def client_step(labels, logits, history, count, refurbished, num_classes: int,
                threshold: float, noise_rate: float, active: bool,
                count_empty_slots: bool = True) -> tuple:
  """One batch: ``(loss [B], history, count, refurbished)`` rows. The history takes the
  batch's predictions; in warm-up (``active`` False) the loss is plain cross-entropy and
  nothing is refurbished."""
  history, count = update_history(history, count, np.argmax(np.asarray(logits), axis=1))
  if not active:
    return coteaching.cross_entropy(labels, logits), history, count, np.asarray(refurbished)
  refurbished = refurbish(history, count, refurbished, num_classes, threshold,
                          count_empty_slots)
  return selfie_loss(labels, logits, refurbished, noise_rate), history, count, refurbished


def refurbish_report(refurbished, true_labels, observed_labels) -> dict:
  """Scores the refurbished labels against the truth (reporting only): how many examples
  are refurbished, the fraction of them refurbished to their true label, and of the
  flipped examples (observed ≠ true) the fraction refurbished to their true label."""
  refurbished = np.asarray(refurbished)
  true_labels, observed = np.asarray(true_labels), np.asarray(observed_labels)
  done = refurbished != NOT_REFURBISHED
  flipped = observed != true_labels
  right = done & (refurbished == true_labels)
  return {
      'refurbished': int(done.sum()),
      'precision': float(right.sum() / done.sum()) if done.any() else float('nan'),
      'flips_corrected': float(right[flipped].mean()) if flipped.any() else float('nan'),
  }
