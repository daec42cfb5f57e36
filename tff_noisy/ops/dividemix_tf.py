"""TensorFlow twins of ``dividemix`` for a client's training step: the sharpened targets
(no gradient flows into them, as the released code's ``torch.no_grad``), the MixMatch draw
and the three loss terms."""

import numpy as np
import tensorflow as tf

from tff_noisy.ops import mixup_tf


def sharpen(p, temperature):
  """``dividemix.sharpen`` (Li et al. 2020, Eq. 4) over the last axis."""
  powered = tf.pow(p, 1.0 / tf.cast(temperature, p.dtype))
  return powered / tf.reduce_sum(powered, axis=-1, keepdims=True)


def refine_labels(labels, w, augmented_logits, temperature):
  """``dividemix.refine_labels`` (Eqs. 3-4): ``augmented_logits`` [M, B, C], ``w`` [B]."""
  probs = tf.reduce_mean(tf.nn.softmax(augmented_logits), axis=0)
  onehot = tf.one_hot(tf.cast(labels, tf.int32), tf.shape(probs)[-1], dtype=probs.dtype)
  w = tf.cast(w, probs.dtype)[:, None]
  return tf.stop_gradient(sharpen(w * onehot + (1.0 - w) * probs, temperature))


def co_guess(logits_f, logits_g, temperature):
  """``dividemix.co_guess`` (Algorithm 1, co-guessing): [M, B, C] logits of each network."""
  probs = tf.concat([tf.nn.softmax(logits_f), tf.nn.softmax(logits_g)], axis=0)
  return tf.stop_gradient(sharpen(tf.reduce_mean(probs, axis=0), temperature))


def draw(seed, batch_size, alpha: float) -> tuple:
  """``(λ', π)`` of one mixed batch from a stateless ``seed``: ``mixup_tf.draw``'s
  λ ~ Beta(α, α) turned into λ' = max(λ, 1 − λ) (Eq. 6)."""
  lam, permutation = mixup_tf.draw(seed, batch_size, alpha)
  return tf.maximum(lam, 1.0 - lam), permutation


def labelled_loss(logits_x, targets_x):
  """Per-row −Σ_c p'_c log softmax(z)_c [B]; its mean is L_X (Eq. 9)."""
  return -tf.reduce_sum(tf.stop_gradient(targets_x) * tf.nn.log_softmax(logits_x), axis=-1)


def unlabelled_loss(logits_u, targets_u):
  """Per-row mean_c (softmax(z)_c − q'_c)² [B]; its mean is L_U (Eq. 10, the code's 1/C)."""
  return tf.reduce_mean(tf.square(tf.nn.softmax(logits_u) - tf.stop_gradient(targets_u)),
                        axis=-1)


def prior_regularizer(logits):
  """L_reg = Σ_c (1/C) log((1/C) / mean_b softmax(z_b)_c) (Eq. 11), a scalar."""
  mean_p = tf.reduce_mean(tf.nn.softmax(logits), axis=0)
  prior = tf.fill(tf.shape(mean_p), 1.0 / tf.cast(tf.size(mean_p), logits.dtype))
  return tf.reduce_sum(prior * tf.math.log(prior / mean_p))


def lambda_u_weight(progress, warmup_rounds, lambda_u, rampup_rounds=16.0):
  """``dividemix.lambda_u_weight``: λ_u · clip((t − T_w) / 16, 0, 1), float32."""
  t = (tf.cast(progress, tf.float32) - tf.cast(warmup_rounds, tf.float32)) / rampup_rounds
  return tf.cast(lambda_u, tf.float32) * tf.clip_by_value(t, 0.0, 1.0)


def per_example_loss(logits, targets, num_labelled, lambda_u, lambda_r=1.0):
  """``dividemix.per_example_loss``: ℓ [N] with mean L_X + λ_u L_U + λ_r L_reg; the first
  ``num_labelled`` rows are X', the rest U'."""
  n = tf.shape(logits)[0]
  num_labelled = tf.cast(num_labelled, tf.int32)
  is_x = tf.range(n) < num_labelled
  total = tf.cast(n, logits.dtype)
  x_scale = total / tf.cast(tf.maximum(num_labelled, 1), logits.dtype)
  u_scale = total / tf.cast(tf.maximum(n - num_labelled, 1), logits.dtype)
  loss = tf.where(is_x, x_scale * labelled_loss(logits, targets),
                  tf.cast(lambda_u, logits.dtype) * u_scale * unlabelled_loss(logits, targets))
  return loss + tf.cast(lambda_r, logits.dtype) * prior_regularizer(logits)


def clean_probability(losses, max_iter: int = 100, tol: float = 1e-2,
                      reg_covar: float = 5e-4):
  """``dividemix.clean_probability_em`` (Li et al. 2020, §3.1; co-divide) in float64 on
  the losses [n]: EM on the min-max scaled losses from means (0, 1), variances var + reg,
  weights 1/2; w [n] float32, ones when n < 2 or the losses are all equal."""
  losses = tf.cast(tf.reshape(losses, [-1]), tf.float64)
  n = tf.size(losses)

  def fit():
    low = tf.reduce_min(losses)
    x = (losses - low) / (tf.reduce_max(losses) - low)
    eps = tf.constant(10 * 2.220446049250313e-16, tf.float64)

    def e_step(params):
      means, variances, weights = params
      log_prob = (tf.math.log(weights) - 0.5 * (
          tf.math.log(2 * np.pi * variances) + tf.square(x[:, None] - means) / variances))
      norm = tf.reduce_logsumexp(log_prob, axis=1)
      return norm, tf.exp(log_prob - norm[:, None])

    def body(i, params, bound, done):
      del done
      norm, resp = e_step(params)
      counts = tf.reduce_sum(resp, axis=0) + eps
      means = tf.reduce_sum(resp * x[:, None], axis=0) / counts
      variances = tf.reduce_sum(resp * tf.square(x[:, None] - means), axis=0) / counts
      params = (means, variances + reg_covar, counts / tf.reduce_sum(counts))
      new_bound = tf.reduce_mean(norm)
      return i + 1, params, new_bound, tf.abs(new_bound - bound) < tol

    start = (tf.constant([0.0, 1.0], tf.float64),
             tf.fill([2], tf.math.reduce_variance(x) + reg_covar),
             tf.constant([0.5, 0.5], tf.float64))
    _, params, _, _ = tf.while_loop(
        lambda i, params, bound, done: tf.logical_and(i < max_iter, tf.logical_not(done)),
        body, (tf.constant(0), start, tf.constant(-np.inf, tf.float64), tf.constant(False)))
    resp = e_step(params)[1]
    return tf.cast(tf.gather(resp, tf.argmin(params[0]), axis=1), tf.float32)

  degenerate = tf.logical_or(n < 2, tf.equal(tf.reduce_min(losses), tf.reduce_max(losses)))
  return tf.cond(degenerate, lambda: tf.ones([n], tf.float32), fit)


def masked_per_example_loss(logits, targets, labelled, lambda_u, lambda_r=1.0):
  """``dividemix.masked_per_example_loss``: ℓ [N], X' the rows where ``labelled``."""
  labelled = tf.cast(labelled, tf.bool)
  total = tf.cast(tf.shape(logits)[0], logits.dtype)
  count = tf.reduce_sum(tf.cast(labelled, logits.dtype))
  loss = tf.where(labelled, total / tf.maximum(count, 1.0) * labelled_loss(logits, targets),
                  tf.cast(lambda_u, logits.dtype) * total / tf.maximum(total - count, 1.0)
                  * unlabelled_loss(logits, targets))
  return loss + tf.cast(lambda_r, logits.dtype) * prior_regularizer(logits)
