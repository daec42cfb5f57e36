"""FedLSR's local self-regularisation in NumPy (Jiang et al., CIKM 2022; the authors'
FedLSR notebook and their FNBench ``LocalUpdateFedLSR``, which agree but for γ_e).

A client feeds each batch x and a second view x' = t(x) through the same network,
logits z₁ = f(x), z₂ = f(x'), C classes, and trains on (per example, batch-mean = the
code's loss):

- MixUp prediction and sharpening (paper §4, Fig. 2): p = λ softmax(z₁) + (1 − λ)
  softmax(z₂), one λ ~ Beta(1, 1) per batch; p_s = p^(1/T) / Σ p^(1/T), T = 1/2 (the
  code's p²). Loss against the observed label ŷ:
  ``code``: −log softmax(p_s)_ŷ (the code passes the probabilities p_s to
  ``nn.CrossEntropyLoss``, which softmaxes them again); ``plain``: −log p_s,ŷ.
- Self distillation (§4): q_v = clamp(softmax(z_v / T_d), 1e-6, 1), T_d = 1/3 (the
  code's ``distill_t = 3`` multiplies the logits), and their Jensen-Shannon divergence
  JS = ½ Σ_c [q₁ log(q₁/m) + q₂ log(q₂/m)], m = (q₁ + q₂)/2 (no stop-gradient on either
  view). ``code``: JS / C (``KLDivLoss(reduction='mean')`` averages over B·C entries);
  ``plain``: JS. Weighted by γ(t), ramped over the warm-up (:func:`distillation_weight`).
- Entropy regularisation (the paper's discussion, "FedLSR+"; in FNBench's default),
  minimised with weight γ_e: ``code``: H(softmax(q₁)) (the code softmaxes q₁ again and
  averages the same q₁ term twice); ``plain``: ½ (H(q₁) + H(q₂)).

``fedlsr_tf`` holds the TensorFlow twins the clients train with.
"""

import numpy as np
import scipy.special

VARIANTS = ('code', 'plain')
GAMMA = 0.4  # γ, the self-distillation weight after warm-up (FNBench ``--gamma``).
GAMMA_E = 0.3  # γ_e, the entropy weight (FNBench ``--gamma_e``; the notebook: 0.6).
INVERSE_DISTILL_TEMPERATURE = 3.0  # 1/T_d (FNBench ``--distill_t``).
SHARPEN_TEMPERATURE = 0.5  # T of the sharpening (the code's p**2).
WARMUP_RATIO = 0.2  # t_w / total rounds (FNBench ``--warm_up_ratio_lsr``).
MIX_ALPHA = 1.0  # λ ~ Beta(α, α) (the code's ``np.random.beta(1, 1)``).
CLAMP = 1e-6  # Lower clamp of q₁, q₂ [the code].


def _check_variant(variant: str) -> None:
  if variant not in VARIANTS:
    raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")


def warmup_rounds(total_rounds: int, ratio: float = WARMUP_RATIO) -> float:
  """t_w = ratio · total rounds, unrounded (the code's ``args.epochs * 0.2``)."""
  if not 0 <= ratio <= 1:
    raise ValueError(f'the warm-up ratio must be in [0, 1], got {ratio}')
  return float(total_rounds) * float(ratio)


def distillation_weight(round_num: int, gamma: float = GAMMA,
                        warmup: float = 0.0) -> float:
  """γ(t) of round ``round_num`` = 1, 2, ...: γ·t / t_w for t < t_w, else γ, with the
  code's 0-based t = round_num − 1 (round 1 distils with weight 0)."""
  if round_num < 1:
    raise ValueError(f'rounds count from 1, got {round_num}')
  t = round_num - 1
  if t < warmup:
    return float(gamma * t / warmup)
  return float(gamma)


def sharpen(probs, temperature: float = SHARPEN_TEMPERATURE) -> np.ndarray:
  """p^(1/T) / Σ_c p^(1/T) per row (§4, the sharpening of the MixUp prediction)."""
  p = np.asarray(probs, np.float64) ** (1.0 / temperature)
  return p / p.sum(axis=-1, keepdims=True)


def mixed_prediction(logits, logits_aug, mix: float) -> np.ndarray:
  """λ softmax(z₁) + (1 − λ) softmax(z₂) [B, C] (§4, MixUp prediction)."""
  return (mix * scipy.special.softmax(np.asarray(logits, np.float64), axis=-1)
          + (1.0 - mix) * scipy.special.softmax(np.asarray(logits_aug, np.float64), axis=-1))


def tempered_probs(logits, inverse_temperature: float = INVERSE_DISTILL_TEMPERATURE,
                   clamp: float = CLAMP) -> np.ndarray:
  """q = clamp(softmax(z / T_d), clamp, 1) [B, C], not renormalised (the code)."""
  q = scipy.special.softmax(np.asarray(logits, np.float64) * inverse_temperature, axis=-1)
  return np.clip(q, clamp, 1.0)


def js_divergence(q1, q2) -> np.ndarray:
  """½ Σ_c [q₁ log(q₁/m) + q₂ log(q₂/m)], m = (q₁ + q₂)/2, per row [B] (§4, L_sd)."""
  q1, q2 = np.asarray(q1, np.float64), np.asarray(q2, np.float64)
  log_m = np.log((q1 + q2) / 2.0)
  return 0.5 * np.sum(q1 * (np.log(q1) - log_m) + q2 * (np.log(q2) - log_m), axis=-1)


def entropy(probs) -> np.ndarray:
  """−Σ_c p log p per row [B]."""
  p = np.asarray(probs, np.float64)
  return -np.sum(p * np.log(p), axis=-1)


def loss_terms(logits, logits_aug, labels, mix: float, *, variant: str = 'code',
               inverse_temperature: float = INVERSE_DISTILL_TEMPERATURE,
               sharpen_temperature: float = SHARPEN_TEMPERATURE) -> dict:
  """Per-example ``ce``, ``distill`` and ``entropy`` [B] of the module doc."""
  _check_variant(variant)
  labels = np.asarray(labels, np.int64)
  logits, logits_aug = np.asarray(logits, np.float64), np.asarray(logits_aug, np.float64)
  num_classes = logits.shape[-1]
  q1 = tempered_probs(logits, inverse_temperature)
  q2 = tempered_probs(logits_aug, inverse_temperature)
  if variant == 'code':
    p_s = sharpen(mixed_prediction(logits, logits_aug, mix), sharpen_temperature)
    log_target = scipy.special.log_softmax(p_s, axis=-1)
    return {'ce': -np.take_along_axis(log_target, labels[:, None], axis=1)[:, 0],
            'distill': js_divergence(q1, q2) / num_classes,
            'entropy': entropy(scipy.special.softmax(q1, axis=-1))}
  # log p_s from log-probabilities, so that a tiny p does not underflow to log 0.
  with np.errstate(divide='ignore'):
    log_mix = np.logaddexp(
        np.log(mix) + scipy.special.log_softmax(logits, axis=-1),
        np.log(1.0 - mix) + scipy.special.log_softmax(logits_aug, axis=-1))
  log_p_s = scipy.special.log_softmax(log_mix / sharpen_temperature, axis=-1)
  return {'ce': -np.take_along_axis(log_p_s, labels[:, None], axis=1)[:, 0],
          'distill': js_divergence(q1, q2),
          'entropy': 0.5 * (entropy(q1) + entropy(q2))}


def fedlsr_loss(logits, logits_aug, labels, mix: float, distill_weight: float,
                entropy_weight: float = GAMMA_E, *, variant: str = 'code',
                inverse_temperature: float = INVERSE_DISTILL_TEMPERATURE,
                sharpen_temperature: float = SHARPEN_TEMPERATURE) -> np.ndarray:
  """ce + γ(t) distill + γ_e entropy per example [B]; its batch mean is the code's loss."""
  t = loss_terms(logits, logits_aug, labels, mix, variant=variant,
                 inverse_temperature=inverse_temperature,
                 sharpen_temperature=sharpen_temperature)
  return t['ce'] + distill_weight * t['distill'] + entropy_weight * t['entropy']
