"""MaskedOptim's client-side losses in TensorFlow: twins of ``ops.label_distribution``.

Used inside the TFF client computation (``methods/maskedoptim/parts.py``); tests
hold each equal to its NumPy twin and the autodiff gradient of the batch-mean loss with
respect to the label logits equal to ``label_distribution.label_logits_gradient``.
"""

import tensorflow as tf

from tff_noisy.ops.label_distribution import CLIP_EPS, PRIOR_FLOOR, VARIANTS


def class_counts(labels, num_classes: int):
  """n_c of ``labels`` [C] float32."""
  return tf.math.bincount(tf.cast(labels, tf.int32), minlength=num_classes,
                          maxlength=num_classes, dtype=tf.float32)


def dataset_class_counts(dataset, num_classes: int):
  """n_c of a client's dataset [C] float32: a label-only pass over its batches."""
  return dataset.map(lambda batch: batch['y']).reduce(
      tf.zeros([num_classes]), lambda total, y: total + class_counts(y, num_classes))


def prior_from_counts(counts, floor: float = PRIOR_FLOOR):
  """π_c = n_c / n, floored at ``floor`` [C] (n = 0: every class at the floor)."""
  return tf.maximum(counts / tf.maximum(tf.reduce_sum(counts), 1.0), floor)


def class_prior(labels, num_classes: int, floor: float = PRIOR_FLOOR):
  """π_c = n_c / n of the observed labels, floored at ``floor`` [C] float32."""
  return prior_from_counts(class_counts(labels, num_classes), floor)


def logit_adjusted_cross_entropy(labels, logits, log_prior):
  """-log softmax(z + log π)_ŷ per example [B] (Eq. 4); ``log_prior`` [C]."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int32), logits=logits + log_prior)


def keep_count(batch_size, tau: float, floor: bool = False):
  """⌈τ|B|⌉ in [1, |B|] (int32), or with ``floor`` ⌊τ|B|⌋, computed in float64 like the
  NumPy twin."""
  batch = tf.cast(batch_size, tf.float64)
  if floor:
    return tf.cast(tf.math.floor(batch * tau), tf.int32)
  kept = tf.math.ceil(batch * tau - 1e-9)
  return tf.cast(tf.clip_by_value(kept, tf.minimum(tf.constant(1.0, tf.float64), batch),
                                   batch), tf.int32)


def smallest_loss_mask(losses, tau: float, floor: bool = False):
  """1.0 on the ``keep_count`` smallest ``losses`` [B] (lower index first on ties), no
  gradient."""
  losses = tf.stop_gradient(losses)
  size = tf.shape(losses)[0]
  keep = tf.math.top_k(-losses, k=keep_count(size, tau, floor), sorted=True).indices
  return tf.scatter_nd(keep[:, None], tf.ones(tf.shape(keep), losses.dtype), [size])


def logit_clip(logits, tau_c: float = 1.0):
  """LogitClip as the released code: z / (‖z‖ + 1e-7) / τ_c where ‖z‖ + 1e-7 > τ_c."""
  norms = tf.norm(logits, axis=-1, keepdims=True) + CLIP_EPS
  return tf.where(norms > tau_c, logits / norms / tau_c, logits)


def label_distribution_loss(labels, logits, label_logits, *, alpha: float = 0.5,
                            beta: float = 0.1, tau: float = 0.8, mask: bool = True,
                            variant: str = 'paper', clip: float = 1.0):
  """The noisy clients' per-example loss [B] (``label_distribution`` module doc)."""
  if variant not in VARIANTS:
    raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
  labels = tf.cast(labels, tf.int32)
  if variant == 'code_v1':
    logits = logit_clip(logits, clip)
  log_p = tf.nn.log_softmax(logits)
  p = tf.exp(log_p)
  log_yd = tf.nn.log_softmax(label_logits)
  entropy = -tf.reduce_sum(p * log_p, axis=-1)
  comp = -tf.gather(log_yd, labels, batch_dims=1)
  if variant == 'paper':
    cls = -tf.reduce_sum(tf.exp(log_yd) * log_p, axis=-1)
    m = smallest_loss_mask(cls, tau) if mask else tf.ones_like(cls)
    return cls + alpha * comp + beta * m * entropy
  num_classes = tf.cast(tf.shape(logits)[-1], logits.dtype)
  cls = tf.reduce_sum(p * (log_p - log_yd), axis=-1)
  if not mask:
    m = tf.ones_like(cls)
  elif variant == 'code':
    m = smallest_loss_mask(-tf.gather(log_p, labels, batch_dims=1), tau, floor=True)
  else:
    m = tf.cast(tf.equal(tf.argmax(p, axis=-1, output_type=tf.int32), labels), p.dtype)
  return cls / num_classes + alpha * m * comp + beta * entropy / num_classes


def merge_label_logits(label_logits, probs, scale: float):
  """ỹ ← K (P + softmax(ỹ)) / 2 (Alg. 1, line 35)."""
  return scale * (probs + tf.nn.softmax(label_logits)) / 2.0
