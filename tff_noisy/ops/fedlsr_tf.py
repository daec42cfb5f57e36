"""TensorFlow twins of ``fedlsr`` (Jiang et al. 2022), run in client training: the
per-example loss on the two views' logits, the ramp γ(t) as a tensor, the batch's
mixing weight λ, and the second view x' = t(x) (FNBench's CIFAR-10 augmentation; the
notebook's rotation for one-channel images), each drawn statelessly from a seed so that
a rerun sees every batch as before. Gradients flow through both views, as in the
authors' code."""

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


# The second view x' = t(x) (FNBench's CIFAR-10 ``tt_transform``, torchvision semantics on
# images in [0, 1], NHWC): a horizontal flip (p = 1/2), then ColorJitter(0.8, 0.8, 0.8,
# 0.2) with p = 0.8 (brightness, contrast, saturation factors ~ U[0.2, 1.8], hue shift ~
# U[-0.2, 0.2], applied in a random order), then grayscale with p = 0.2. The code draws
# once per batch (torchvision transforms on a batch tensor), so one draw serves the batch.
# For one-channel images the authors' notebook uses RandomRotation(30) instead: an
# angle ~ U[-30°, 30°], nearest pixel, zero fill.
JITTER = 0.8  # Brightness, contrast and saturation strength (factors in [1 - s, 1 + s]).
HUE = 0.2  # Hue shift bound (a fraction of the hue circle).
FLIP_P, JITTER_P, GRAY_P = 0.5, 0.8, 0.2
ROTATION_DEGREES = 30.0
_GRAY = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale weights.


def grayscale(images):
  """0.2989 R + 0.587 G + 0.114 B, kept as 3 equal channels [B, H, W, 3]."""
  gray = tf.reduce_sum(images * tf.constant(_GRAY, images.dtype), axis=-1, keepdims=True)
  return tf.broadcast_to(gray, tf.shape(images))


def adjust_brightness(images, factor):
  """clip(f x, 0, 1) (torchvision ``adjust_brightness``)."""
  return tf.clip_by_value(factor * images, 0.0, 1.0)


def adjust_contrast(images, factor):
  """clip(f x + (1 − f) μ, 0, 1), μ the mean gray level of each image."""
  mean = tf.reduce_mean(grayscale(images)[..., :1], axis=[1, 2, 3], keepdims=True)
  return tf.clip_by_value(factor * images + (1.0 - factor) * mean, 0.0, 1.0)


def adjust_saturation(images, factor):
  """clip(f x + (1 − f) gray(x), 0, 1)."""
  return tf.clip_by_value(factor * images + (1.0 - factor) * grayscale(images), 0.0, 1.0)


def adjust_hue(images, delta):
  """Hue rotated by ``delta`` of the circle (HSV), as torchvision ``adjust_hue``."""
  return tf.image.adjust_hue(images, delta)


def rotate(images, degrees):
  """Each image rotated counter-clockwise by ``degrees`` about its centre, nearest
  pixel, zero fill (torchvision ``rotate``)."""
  theta = degrees * (3.141592653589793 / 180.0)
  height = tf.cast(tf.shape(images)[1], tf.float32)
  width = tf.cast(tf.shape(images)[2], tf.float32)
  cx, cy = (width - 1.0) / 2.0, (height - 1.0) / 2.0
  cos, sin = tf.cos(theta), tf.sin(theta)
  # Output pixel (x, y) reads input (cos dx − sin dy + cx, sin dx + cos dy + cy).
  transform = tf.stack([cos, -sin, cx - cos * cx + sin * cy,
                        sin, cos, cy - sin * cx - cos * cy, 0.0, 0.0])
  transforms = tf.tile(transform[None, :], [tf.shape(images)[0], 1])
  return tf.raw_ops.ImageProjectiveTransformV3(
      images=images, transforms=transforms, output_shape=tf.shape(images)[1:3],
      fill_value=0.0, interpolation='NEAREST', fill_mode='CONSTANT')


def draw_view(seed):
  """One batch's draw (a dict of scalars) from a stateless ``seed`` (int32 [2])."""
  seeds = tf.unstack(tf.random.experimental.stateless_split(seed, 5))
  u = tf.random.stateless_uniform([4], seeds[0])
  factors = tf.random.stateless_uniform([3], seeds[1], 1.0 - JITTER, 1.0 + JITTER)
  return {'flip': u[0] < FLIP_P, 'jitter': u[1] < JITTER_P, 'gray': u[2] < GRAY_P,
          'brightness': factors[0], 'contrast': factors[1], 'saturation': factors[2],
          'hue': tf.random.stateless_uniform([], seeds[2], -HUE, HUE),
          'order': tf.argsort(tf.random.stateless_uniform([4], seeds[3])),
          'degrees': tf.random.stateless_uniform([], seeds[4], -ROTATION_DEGREES,
                                                 ROTATION_DEGREES)}


def apply_view(images, draw):
  """x' of :func:`draw_view`'s draw: flip, jitter in ``order`` (0 brightness, 1
  contrast, 2 saturation, 3 hue), grayscale, for RGB images; a rotation by ``degrees``
  for one-channel images."""
  if images.shape[-1] == 1:
    return rotate(images, draw['degrees'])
  x = tf.where(draw['flip'], tf.reverse(images, axis=[2]), images)
  ops = [lambda y: adjust_brightness(y, draw['brightness']),
         lambda y: adjust_contrast(y, draw['contrast']),
         lambda y: adjust_saturation(y, draw['saturation']),
         lambda y: adjust_hue(y, draw['hue'])]
  jittered = x
  for position in range(4):
    jittered = tf.switch_case(draw['order'][position],
                              [lambda op=op, y=jittered: op(y) for op in ops])
  x = tf.where(draw['jitter'], jittered, x)
  return tf.where(draw['gray'], grayscale(x), x)


def second_view(images, seed):
  """x' = t(x) of one batch [B, H, W, C] in [0, 1] (see above)."""
  return apply_view(images, draw_view(seed))
