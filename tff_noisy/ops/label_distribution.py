"""MaskedOptim's client-side mathematics in NumPy (Jiang et al. 2025;
docs/papers/maskedoptim.md).

Warm-up and clean clients (§4.1, Eq. 4): cross-entropy of the logits adjusted by the
log of the client's class prior of its *observed* labels, floored at 1e-8 (the code's
log 0 = -inf); in training only.

Noisy clients (§4.2) learn per-sample label logits ỹ [n, C], initialised to K·onehot(ŷ)
(K = 10), with label distribution y^d = softmax(ỹ). With p = softmax(z):

- ``variant='paper'`` (Eqs. 9-14, the default):
  L_i = L_c + α L_comp + β m_i H(p), where L_c = -Σ y^d log p, L_comp = -log y^d_ŷ,
  H(p) = -Σ p log p and m_i = 1 for the ⌈τ|B|⌉ samples of the batch with the smallest
  L_c (stop-gradient; ties: the lower index first), else 0;
- ``variant='code'`` (the released code's current commit a8e8e55;
  docs/papers/maskedoptim.md, ambiguity 1):
  L_i = KL(p ‖ y^d)/C + α m_i L_comp + β H(p)/C with m_i = 1 for the ⌊τ|B|⌋ samples of the
  batch with the smallest cross-entropy −log p_ŷ against the *observed* label
  (stop-gradient; ties: the lower index first), the entropy term unmasked;
- ``variant='code_v1'`` (the released code's first commit 537361f, which docs/results.md's
  earlier measurements used): the logits are first clipped (LogitClip: z ← z / (‖z‖ +
  1e-7) / τ_c where ‖z‖ + 1e-7 > τ_c, τ_c = 1), and the same loss with m_i = [argmax p =
  ŷ]; τ is unused.

``mask=False`` sets every m_i to 1 (the no-mask ablation). The label logits take a plain
gradient step on the batch-mean loss, ỹ ← ỹ − η ∇_ỹ mean_B L (η = 1000); after local
training they merge with the trained model's eval-mode probabilities P:
ỹ ← K (P + softmax(ỹ)) / 2; ``argmax`` of the result is the corrected label. Pre-merge
(Eq. 16): w_k ← ζ w_k + (1 − ζ) w, so the client's update (w − w_k) is scaled by ζ.

``ops/label_distribution_tf.py`` holds the TensorFlow twins used in training; tests hold
them equal, and their autodiff gradient equal to :func:`label_logits_gradient`.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import common

PRIOR_FLOOR = 1e-8
VARIANTS = ('paper', 'code', 'code_v1')
LABEL_SCALE = 10.0  # K [C].
CLIP_EPS = 1e-7  # LogitClip's norm offset [C].


def _check_variant(variant: str) -> None:
  if variant not in VARIANTS:
    raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")


def class_prior(labels, num_classes: int, floor: float = PRIOR_FLOOR) -> np.ndarray:
  """π_c = n_c / n of the observed labels, floored at ``floor`` [C]."""
  labels = common.check_labels(labels, num_classes)
  counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
  return np.maximum(counts / max(len(labels), 1), floor)


def logit_adjusted_cross_entropy(logits, labels, prior) -> np.ndarray:
  """-log softmax(z + log π)_ŷ per example [B] (Eq. 4, Menon et al. 2021)."""
  adjusted = np.asarray(logits, np.float64) + np.log(np.asarray(prior, np.float64))
  log_p = scipy.special.log_softmax(adjusted, axis=-1)
  return -np.take_along_axis(log_p, np.asarray(labels)[:, None], axis=1)[:, 0]


def initial_label_logits(labels, num_classes: int, scale: float = LABEL_SCALE) -> np.ndarray:
  """ỹ = K·onehot(ŷ) [n, C] float32 (Eqs. 5/7)."""
  labels = common.check_labels(labels, num_classes)
  return (scale * np.eye(num_classes, dtype=np.float32)[labels]).astype(np.float32)


def keep_count(batch_size: int, tau: float, floor: bool = False) -> int:
  """⌈τ|B|⌉, at least 1 for a non-empty batch (1e-9 absorbs τ|B|'s rounding); with
  ``floor``, the released code's int(τ|B|) (⌊τ|B|⌋ of the float64 product, 0 allowed)."""
  if not 0 < tau <= 1:
    raise ValueError(f'tau must be in (0, 1], got {tau}')
  if batch_size <= 0:
    return 0
  if floor:
    return int(np.floor(tau * batch_size))
  return int(min(batch_size, max(1, np.ceil(tau * batch_size - 1e-9))))


def smallest_loss_mask(losses, tau: float, floor: bool = False) -> np.ndarray:
  """1.0 on the ``keep_count`` smallest ``losses`` [B] (lower index first on ties)."""
  losses = np.asarray(losses)
  keep = np.argsort(losses, kind='stable')[:keep_count(len(losses), tau, floor)]
  mask = np.zeros(len(losses))
  mask[keep] = 1.0
  return mask


def logit_clip(logits, tau_c: float = 1.0) -> np.ndarray:
  """LogitClip (Wei et al. 2023), as the released code: rescale rows of norm > τ_c."""
  logits = np.asarray(logits, np.float64)
  norms = np.linalg.norm(logits, axis=-1, keepdims=True) + CLIP_EPS
  return np.where(norms > tau_c, logits / norms / tau_c, logits)


def loss_terms(logits, label_logits, labels, *, tau: float = 0.8, mask: bool = True,
               variant: str = 'paper', clip: float = 1.0) -> dict:
  """Per-example terms [B]: ``cls`` (L_c or KL), ``comp``, ``entropy``, ``mask``, and
  ``probs`` (p, after LogitClip in the code_v1 variant) [B, C]."""
  _check_variant(variant)
  logits = np.asarray(logits, np.float64)
  if variant == 'code_v1':
    logits = logit_clip(logits, clip)
  labels = np.asarray(labels)
  log_p = scipy.special.log_softmax(logits, axis=-1)
  p = np.exp(log_p)
  log_yd = scipy.special.log_softmax(np.asarray(label_logits, np.float64), axis=-1)
  yd = np.exp(log_yd)
  entropy = -np.sum(p * log_p, axis=-1)
  comp = -np.take_along_axis(log_yd, labels[:, None], axis=1)[:, 0]
  if variant == 'paper':
    cls = -np.sum(yd * log_p, axis=-1)
    m = smallest_loss_mask(cls, tau) if mask else np.ones(len(labels))
  else:
    cls = np.sum(p * (log_p - log_yd), axis=-1)
    if not mask:
      m = np.ones(len(labels))
    elif variant == 'code':
      observed_ce = -np.take_along_axis(log_p, labels[:, None], axis=1)[:, 0]
      m = smallest_loss_mask(observed_ce, tau, floor=True)
    else:
      m = (np.argmax(p, axis=-1) == labels).astype(np.float64)
  return {'cls': cls, 'comp': comp, 'entropy': entropy, 'mask': m, 'probs': p, 'yd': yd}


def label_distribution_loss(logits, label_logits, labels, *, alpha: float = 0.5,
                            beta: float = 0.1, tau: float = 0.8, mask: bool = True,
                            variant: str = 'paper', clip: float = 1.0) -> np.ndarray:
  """The noisy clients' per-example loss [B] (see the module doc)."""
  t = loss_terms(logits, label_logits, labels, tau=tau, mask=mask, variant=variant,
                 clip=clip)
  if variant == 'paper':
    return t['cls'] + alpha * t['comp'] + beta * t['mask'] * t['entropy']
  num_classes = np.shape(logits)[-1]
  return (t['cls'] / num_classes + alpha * t['mask'] * t['comp']
          + beta * t['entropy'] / num_classes)


def label_logits_gradient(logits, label_logits, labels, *, alpha: float = 0.5,
                          tau: float = 0.8, mask: bool = True, variant: str = 'paper',
                          clip: float = 1.0) -> np.ndarray:
  """∇_ỹ of the batch-mean loss [B, C], in closed form (β's term does not involve ỹ).

  paper: (y^d ⊙ (−log p − L_c) + α (y^d − e_ŷ)) / |B|;
  code: ((y^d − p)/C + α m (y^d − e_ŷ)) / |B|.
  """
  t = loss_terms(logits, label_logits, labels, tau=tau, mask=mask, variant=variant,
                 clip=clip)
  batch, num_classes = np.shape(logits)
  onehot = np.eye(num_classes)[np.asarray(labels)]
  comp = t['yd'] - onehot
  if variant == 'paper':
    log_p = np.log(t['probs'])
    cls = t['yd'] * (-log_p - t['cls'][:, None])
    return (cls + alpha * comp) / batch
  return ((t['yd'] - t['probs']) / num_classes + alpha * t['mask'][:, None] * comp) / batch


def update_label_logits(label_logits, gradient, lr: float) -> np.ndarray:
  """ỹ − η ∇ (Eq. 15): plain gradient descent, no momentum, no weight decay."""
  return np.asarray(label_logits) - lr * np.asarray(gradient)


def merge_label_logits(label_logits, probs, scale: float = LABEL_SCALE) -> np.ndarray:
  """ỹ ← K (P + softmax(ỹ)) / 2 after local training (Alg. 1, line 35)."""
  return scale * (np.asarray(probs) + scipy.special.softmax(
      np.asarray(label_logits, np.float64), axis=-1)) / 2


def corrected_labels(label_logits) -> np.ndarray:
  """argmax softmax(ỹ) = argmax ỹ: the corrected labels [n]."""
  return np.argmax(np.asarray(label_logits), axis=-1)


def pre_merge(local, received, zeta: float):
  """ζ w_k + (1 − ζ) w (Eq. 16), per array of a list."""
  return [zeta * np.asarray(w) + (1 - zeta) * np.asarray(g) for w, g in zip(local, received)]


def estimate_accuracy_report(estimates: dict, observed: dict, true: dict) -> dict:
  """Corrected labels against the simulation's true labels (reporting only).

  ``estimates``, ``observed``, ``true``: {client id: labels [n]}, over the clients of
  ``estimates``. ``accuracy``: fraction of their samples whose estimate is the true label;
  ``observed_accuracy``: the same for the observed labels (1 − their noise rate);
  ``changed``: fraction whose estimate differs from the observed label; ``per_client``:
  each client's accuracy.
  """
  if not estimates:
    return {}
  ids = list(estimates)
  est = np.concatenate([np.asarray(estimates[c]) for c in ids])
  obs = np.concatenate([np.asarray(observed[c]) for c in ids])
  tru = np.concatenate([np.asarray(true[c]) for c in ids])
  if not len(est):
    return {}
  return {
      'accuracy': float(np.mean(est == tru)),
      'observed_accuracy': float(np.mean(obs == tru)),
      'changed': float(np.mean(est != obs)),
      'clients': len(ids), 'samples': int(len(est)),
      'per_client': {c: float(np.mean(np.asarray(estimates[c]) == np.asarray(true[c])))
                     for c in ids if len(true[c])},
  }
