"""TensorFlow twins of ``fedlsr`` (Jiang et al. 2022), run in client training: the
per-example loss on the two views' logits, the ramp γ(t) as a tensor, and the batch's
mixing weight λ drawn statelessly from a seed (a rerun mixes every batch as before).
Gradients flow through both views, as in the authors' code."""

import tensorflow as tf

from tff_noisy.ops.fedlsr import (CLAMP, INVERSE_DISTILL_TEMPERATURE, MIX_ALPHA,
                                  SHARPEN_TEMPERATURE, VARIANTS)


def distillation_weight(round_num, gamma: float, warmup: float):
  """``fedlsr.distillation_weight`` for a (1-based) round tensor: float32 γ(t)."""
  t = tf.cast(round_num, tf.float32) - 1.0
  if warmup <= 0:
    return tf.constant(gamma, tf.float32)
  return tf.where(t < warmup, gamma * t / warmup, tf.constant(gamma, tf.float32))


def draw_mix(seed, alpha: float = MIX_ALPHA):
  """λ ~ Beta(α, α) of one batch from a stateless ``seed`` (int32 [2]), as G₁/(G₁ + G₂)
  of two Gamma(α) draws."""
  first, second = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
  g1 = tf.random.stateless_gamma([], first, alpha)
  g2 = tf.random.stateless_gamma([], second, alpha)
  return g1 / (g1 + g2)


def sharpen(probs, temperature: float = SHARPEN_TEMPERATURE):
  """``fedlsr.sharpen``: p^(1/T) / Σ p^(1/T)."""
  p = tf.pow(probs, 1.0 / temperature)
  return p / tf.reduce_sum(p, axis=-1, keepdims=True)


def tempered_probs(logits, inverse_temperature: float = INVERSE_DISTILL_TEMPERATURE,
                   clamp: float = CLAMP):
  """``fedlsr.tempered_probs``: clamp(softmax(z / T_d), clamp, 1)."""
  return tf.clip_by_value(tf.nn.softmax(logits * inverse_temperature), clamp, 1.0)


def js_divergence(q1, q2):
  """``fedlsr.js_divergence`` per row [B]."""
  log_m = tf.math.log((q1 + q2) / 2.0)
  return 0.5 * tf.reduce_sum(q1 * (tf.math.log(q1) - log_m)
                             + q2 * (tf.math.log(q2) - log_m), axis=-1)


def entropy(probs):
  """−Σ p log p per row [B]."""
  return -tf.reduce_sum(probs * tf.math.log(probs), axis=-1)


def fedlsr_loss(labels, logits, logits_aug, mix, distill_weight, entropy_weight, *,
                variant: str = 'code',
                inverse_temperature: float = INVERSE_DISTILL_TEMPERATURE,
                sharpen_temperature: float = SHARPEN_TEMPERATURE):
  """``fedlsr.fedlsr_loss`` per example [B]; ``mix`` and ``distill_weight`` scalar tensors."""
  if variant not in VARIANTS:
    raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
  labels = tf.cast(labels, tf.int32)
  mix = tf.cast(mix, logits.dtype)
  num_classes = tf.cast(tf.shape(logits)[-1], logits.dtype)
  q1 = tempered_probs(logits, inverse_temperature)
  q2 = tempered_probs(logits_aug, inverse_temperature)
  if variant == 'code':
    p = mix * tf.nn.softmax(logits) + (1.0 - mix) * tf.nn.softmax(logits_aug)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=sharpen(p, sharpen_temperature))
    distill = js_divergence(q1, q2) / num_classes
    ent = entropy(tf.nn.softmax(q1))
  else:
    log_mix = tf.reduce_logsumexp(tf.stack(
        [tf.math.log(mix) + tf.nn.log_softmax(logits),
         tf.math.log(1.0 - mix) + tf.nn.log_softmax(logits_aug)]), axis=0)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=log_mix / sharpen_temperature)
    distill = js_divergence(q1, q2)
    ent = 0.5 * (entropy(q1) + entropy(q2))
  return ce + distill_weight * distill + entropy_weight * ent
