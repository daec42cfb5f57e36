"""TensorFlow twin of ``mixup`` (Zhang et al. 2018, Eq. 1), run in client training, with
its randomness drawn statelessly from a seed, so that a rerun or a resumed run mixes every
batch as before."""

import tensorflow as tf

from tff_noisy.ops import losses


def draw(seed, batch_size, alpha: float) -> tuple:
  """``(λ, π)`` of one batch from a stateless ``seed`` (int32 [2]): λ ~ Beta(α, α) as
  G₁ / (G₁ + G₂) of two Gamma(α) draws, π the order of ``batch_size`` uniform draws."""
  gamma_seed, other_seed, order_seed = tf.unstack(
      tf.random.experimental.stateless_split(seed, 3))
  g1 = tf.random.stateless_gamma([], gamma_seed, alpha)
  g2 = tf.random.stateless_gamma([], other_seed, alpha)
  lam = g1 / (g1 + g2)
  permutation = tf.argsort(tf.random.stateless_uniform([batch_size], order_seed))
  return lam, permutation


def mix(x, lam, permutation):
  """``mixup.mix``: λ x + (1 − λ) x[π], in ``x``'s float dtype."""
  lam = tf.cast(lam, x.dtype)
  return lam * x + (1.0 - lam) * tf.gather(x, permutation)


def mixed_cross_entropy(logits, labels, permutation, lam):
  """``mixup.mixed_cross_entropy``: per-example λ CE(y) + (1 − λ) CE(y[π])."""
  return (lam * losses.cross_entropy(labels, logits)
          + (1.0 - lam) * losses.cross_entropy(tf.gather(labels, permutation), logits))
