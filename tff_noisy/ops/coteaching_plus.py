"""Co-teaching+'s disagreement-then-small-loss cross-update (Yu et al. 2019, Algorithm 1),
NumPy.

Two networks f and g see the same mini-batch of B examples. From round ``init_epoch + 1``
on (before it, plain Co-teaching: ``coteaching.cross_update_loss``) each batch is first cut
to its disagreement set D, the d examples whose predicted classes (argmax of the logits)
differ between f and g. Within D each network keeps the n = ⌊(1 - τ(T))·d⌋ examples of
smallest cross-entropy under itself; f steps on the mean cross-entropy of the examples g
kept, g on those f kept. τ(T) is Co-teaching's schedule (``coteaching.forget_rate``).

As one per-example loss whose batch mean is the sum of the two updates' losses:
ℓ_j = (B/n)·(m^g_j·CE_f,j + m^f_j·CE_g,j), m^f the mask of f's kept examples (ties by batch
position). Choices taken from the authors' code, which FNBench keeps:

- ``on_probabilities``: in the disagreement phase the cross-entropy (for the ranking and
  for the step) is taken of the softmax probabilities as if they were logits,
  -log softmax(softmax(z))_y (both codes pass ``F.softmax`` outputs to ``cross_entropy``);
  False takes it of the logits, as the paper writes.
- An empty D (f and g agree on every example): both networks step on the mean
  cross-entropy of the whole batch (the codes' branch for ``step < 5000``, which FNBench's
  step, local epoch × batch index, never reaches).
- n = 0 (d < 1/(1 - τ), e.g. d = 1): ``none_kept='skip'`` gives ℓ = 0 for the batch
  (FNBench's mean over nothing is a NaN loss whose gradient is 0); ``'all'`` keeps the
  whole of D (the authors' code's fallback).

n is computed in float32, as the clients compute it. ``coteaching_plus_tf`` holds the
TensorFlow twin the clients train with.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import coteaching

NONE_KEPT = ('skip', 'all')

# τ(T): Co-teaching's schedule, ``linspace(0, τ^c, T_k)`` then τ (FNBench: T_k = 0.2·rounds).
forget_rate = coteaching.forget_rate


def disagreement_active(round_num: int, init_epoch: int) -> bool:
  """Whether round T = 1, 2, ... uses the disagreement step: T > ``init_epoch`` (the codes'
  ``epoch >= init_epoch`` with 0-based epochs; FNBench's ``init_epoch`` is 10 rounds)."""
  return round_num > init_epoch


def predictions(logits) -> np.ndarray:
  """argmax of each row, the first class on a tie."""
  return np.argmax(np.asarray(logits), axis=-1)


def disagreement_mask(logits_f, logits_g) -> np.ndarray:
  """bool[B]: ȳ^(f)_j ≠ ȳ^(g)_j, the prediction disagreement D̄' (Algorithm 1, the step
  selecting the prediction disagreement of the mini-batch)."""
  return predictions(logits_f) != predictions(logits_g)


def kept_count(size: int, rate: float) -> int:
  """n = ⌊(1 - τ)·d⌋ in float32 (may be 0): the λ(e)·|D̄'| small-loss examples of Algorithm 1
  (R = 1 - τ), floored as the codes' ``int(remember_rate * len)``."""
  kept = (np.float32(1.0) - np.float32(rate)) * np.float32(size)
  return int(np.floor(kept))


def ranked_cross_entropy(labels, logits, on_probabilities: bool = True) -> np.ndarray:
  """CE_j [B]: -log softmax(softmax(z_j))_y with ``on_probabilities`` (the codes'), else
  -log softmax(z_j)_y."""
  logits = np.asarray(logits, np.float64)
  if on_probabilities:
    logits = scipy.special.softmax(logits, axis=-1)
  return coteaching.cross_entropy(labels, logits)


def selection(labels, logits_f, logits_g, rate: float, on_probabilities: bool = True,
              none_kept: str = 'skip') -> tuple:
  """``(kept_f, kept_g, n)``: bool[B] masks of the examples f and g keep and their count
  (Algorithm 1, the two small-loss selections on D̄'; the module doc for an empty D, where
  both keep the whole batch, and for n = 0)."""
  if none_kept not in NONE_KEPT:
    raise ValueError(f'none_kept must be one of {NONE_KEPT}, got {none_kept!r}')
  ce_f = ranked_cross_entropy(labels, logits_f, on_probabilities)
  ce_g = ranked_cross_entropy(labels, logits_g, on_probabilities)
  disagree = disagreement_mask(logits_f, logits_g)
  size = int(disagree.sum())
  if size == 0:
    everything = np.ones(len(ce_f), bool)
    return everything, everything.copy(), len(ce_f)
  kept = kept_count(size, rate)
  if kept == 0 and none_kept == 'all':
    kept = size
  # Examples outside D rank last; ties keep the earlier example.
  kept_f = coteaching.small_loss_mask(np.where(disagree, ce_f, np.inf), kept)
  kept_g = coteaching.small_loss_mask(np.where(disagree, ce_g, np.inf), kept)
  return kept_f, kept_g, kept


def disagreement_loss(labels, logits_f, logits_g, rate: float, on_probabilities: bool = True,
                      none_kept: str = 'skip') -> np.ndarray:
  """ℓ_j [B] (module doc): its mean is CE_f over g's kept examples of D plus CE_g over f's
  (Algorithm 1, the cross-update steps of w^(1) and w^(2)); 0 when n = 0 is skipped."""
  kept_f, kept_g, kept = selection(labels, logits_f, logits_g, rate, on_probabilities,
                                   none_kept)
  ce_f = ranked_cross_entropy(labels, logits_f, on_probabilities)
  ce_g = ranked_cross_entropy(labels, logits_g, on_probabilities)
  if kept == 0:
    return np.zeros_like(ce_f)
  return len(ce_f) / kept * (kept_g * ce_f + kept_f * ce_g)


def cross_update_loss(labels, logits_f, logits_g, rate: float, disagreement: bool,
                      on_probabilities: bool = True, none_kept: str = 'skip') -> np.ndarray:
  """ℓ_j [B] of one batch: ``disagreement_loss`` when ``disagreement`` (T > init_epoch),
  else Co-teaching's ``coteaching.cross_update_loss`` on the logits (the codes' first
  ``init_epoch`` epochs)."""
  if disagreement:
    return disagreement_loss(labels, logits_f, logits_g, rate, on_probabilities, none_kept)
  return coteaching.cross_update_loss(labels, logits_f, logits_g, rate)


def kept_purity(kept, is_clean) -> float:
  """Fraction of kept examples whose observed label is the true one (the authors' code's
  ``pure_ratio``; reporting only). NaN when nothing is kept."""
  kept = np.asarray(kept, bool)
  if not kept.any():
    return float('nan')
  return float(np.asarray(is_clean, bool)[kept].mean())
