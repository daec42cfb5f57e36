"""Co-teaching's small-loss cross-update (Han et al. 2018, Algorithm 1), NumPy.

Two networks f and g see the same mini-batch of B examples. Each ranks the examples by
its own cross-entropy and keeps the n = ⌊R(T)·B⌋ smallest (at least 1); f then steps on
the mean cross-entropy of the examples g kept, and g on those f kept. R(T) = 1 - τ(T)
with the forget rate τ(T) rising linearly from 0 to τ over the first T_k epochs (rounds
here) and τ after: the authors' code's ``linspace(0, τ^c, T_k)`` for T = 1..T_k.

As one per-example loss whose batch mean is the sum of the two updates' losses:
ℓ_j = (B/n)·(m^g_j·CE_f,j + m^f_j·CE_g,j), m^f the mask of f's kept examples (ties by
batch position). ``coteaching_tf`` holds the TensorFlow twin the clients train with.
"""

import numpy as np
import scipy.special


def forget_rate(round_num: int, rate: float, gradual_rounds: int,
                exponent: float = 1.0) -> float:
  """τ(T) of round T = 1, 2, ...: ``linspace(0, rate**exponent, gradual_rounds)[T - 1]``
  for T <= T_k, then ``rate`` (the authors' ``rate_schedule``)."""
  if round_num > gradual_rounds:
    return float(rate)
  return float(np.linspace(0.0, rate ** exponent, gradual_rounds)[round_num - 1])


def num_remembered(batch_size: int, rate: float) -> int:
  """n = ⌊(1 - τ)·B⌋ in float32, as the clients compute it, and at least 1 (the authors'
  code would average over none)."""
  kept = (np.float32(1.0) - np.float32(rate)) * np.float32(batch_size)
  return max(1, int(np.floor(kept)))


def cross_entropy(labels, logits) -> np.ndarray:
  log_p = scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)
  return -np.take_along_axis(log_p, np.asarray(labels, np.int64)[:, None], axis=-1)[:, 0]


def small_loss_mask(losses, remembered: int) -> np.ndarray:
  """bool[B]: the ``remembered`` smallest losses (ties: the earlier example)."""
  mask = np.zeros(len(losses), bool)
  mask[np.argsort(losses, kind='stable')[:remembered]] = True
  return mask


def cross_update_loss(labels, logits_f, logits_g, rate: float) -> np.ndarray:
  """ℓ_j [B] (module doc): its mean is CE_f over g's kept examples plus CE_g over f's."""
  ce_f, ce_g = cross_entropy(labels, logits_f), cross_entropy(labels, logits_g)
  remembered = num_remembered(len(ce_f), rate)
  kept_f, kept_g = small_loss_mask(ce_f, remembered), small_loss_mask(ce_g, remembered)
  return len(ce_f) / remembered * (kept_g * ce_f + kept_f * ce_g)
