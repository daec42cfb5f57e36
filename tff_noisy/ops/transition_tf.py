"""The transition-matrix estimates in TensorFlow, to run inside a client's computation.

TensorFlow twins of ``transition.confident_joint``, ``normalise_counts``,
``estimate_transition_matrix``, ``anchor_transition_matrix``, ``class_prior``,
``compensate_prior`` and ``is_singular`` (float64 inside, same constants); tests hold them
equal. ``num_classes`` is static: it fixes the matrices' shapes in the TFF types.
"""

import tensorflow as tf

from tff_noisy.ops.transition import check_guess
from tff_noisy.ops.transition import NORMALISATIONS
from tff_noisy.ops.transition import SINGULAR_TOLERANCE
from tff_noisy.ops.transition import THRESHOLD_FLOOR
from tff_noisy.ops.transition import THRESHOLD_SLACK


def per_class_thresholds(probs, noisy_labels, num_classes: int):
  """tau_j = mean p_j over the samples labelled j (Eq. 6), floored; +inf if none."""
  probs = tf.cast(probs, tf.float64)
  one_hot = tf.one_hot(noisy_labels, num_classes, dtype=tf.float64)
  counts = tf.reduce_sum(one_hot, axis=0)
  sums = tf.reduce_sum(one_hot * probs, axis=0)
  inf = tf.constant(float('inf'), tf.float64)
  means = tf.where(counts > 0, sums / tf.maximum(counts, 1.0), inf)
  return tf.maximum(means, THRESHOLD_FLOOR)


def confident_joint(probs, noisy_labels, num_classes: int, guess: str = 'passing'):
  """C[i, j] = #{x labelled i with confident guess j} (Eqs. 3-4, 7), unclipped, float64;
  with 2+ confident classes the guess is the likeliest of them (``passing``) or the
  global argmax (``cleanlab``, [code])."""
  check_guess(guess)
  probs = tf.cast(probs, tf.float64)
  noisy_labels = tf.cast(noisy_labels, tf.int64)
  thresholds = per_class_thresholds(probs, noisy_labels, num_classes)
  confident = probs >= thresholds - THRESHOLD_SLACK
  counted = tf.cast(tf.reduce_any(confident, axis=1), tf.float64)
  masked = tf.where(confident, probs, tf.constant(float('-inf'), tf.float64))
  guessed = tf.argmax(masked, axis=1, output_type=tf.int64)
  if guess == 'cleanlab':
    several = tf.reduce_sum(tf.cast(confident, tf.int32), axis=1) > 1
    guessed = tf.where(several, tf.argmax(probs, axis=1, output_type=tf.int64), guessed)
  counts = tf.math.unsorted_segment_sum(counted, noisy_labels * num_classes + guessed,
                                        num_classes * num_classes)
  return tf.reshape(counts, [num_classes, num_classes])


def normalise_counts(counts, normalise: str = 'column'):
  """Diagonal clipped at >= 1 [code]; columns (Eq. 9) or rows sum to 1. float32."""
  if normalise not in NORMALISATIONS:
    raise ValueError(f"normalise must be one of {', '.join(NORMALISATIONS)}, got "
                     f'{normalise!r}')
  counts = tf.cast(counts, tf.float64)
  counts = tf.linalg.set_diag(counts, tf.maximum(tf.linalg.diag_part(counts), 1.0))
  axis = 0 if normalise == 'column' else 1
  return tf.cast(counts / tf.reduce_sum(counts, axis=axis, keepdims=True), tf.float32)


def estimate_transition_matrix(probs, noisy_labels, num_classes: int,
                               normalise: str = 'column', guess: str = 'passing'):
  """FedEFC's Q [C, C] (float32) from probabilities [N, C] and noisy labels [N]."""
  return normalise_counts(confident_joint(probs, noisy_labels, num_classes, guess),
                          normalise)


def _percentile(values, percentile: float):
  """NumPy's linear-interpolation percentile of each column of ``values`` [N, C]."""
  ordered = tf.sort(values, axis=0)
  position = tf.cast(tf.shape(values)[0] - 1, tf.float64) * (percentile / 100.0)
  low = tf.floor(position)
  below = tf.gather(ordered, tf.cast(low, tf.int32))
  above = tf.gather(ordered, tf.cast(tf.math.ceil(position), tf.int32))
  t = position - low
  step = above - below
  return tf.where(t >= 0.5, above - step * (1.0 - t), below + step * t)  # NumPy's _lerp.


def anchor_transition_matrix(probs, percentile: float = 97.0):
  """Patrini's anchors: column j = mean p over samples with p_j >= its percentile."""
  probs = tf.cast(probs, tf.float64)
  anchors = tf.cast(probs >= _percentile(probs, percentile), tf.float64)
  return tf.cast(tf.matmul(probs, anchors, transpose_a=True) /
                 tf.reduce_sum(anchors, axis=0), tf.float32)


def class_prior(noisy_labels, num_classes: int):
  """pi~_i = |X_i| / n from the noisy labels (float32)."""
  counts = tf.math.bincount(tf.cast(noisy_labels, tf.int32), minlength=num_classes,
                            maxlength=num_classes, dtype=tf.float32)
  return counts / tf.maximum(tf.reduce_sum(counts), 1.0)


def compensate_prior(matrix, prior):
  """W^T with W_ij = Q_ij pi_i / sum_i' Q_i'j pi_i' (0 where that sum is 0) [code]."""
  weighted = tf.cast(matrix, tf.float64) * tf.cast(prior, tf.float64)[:, None]
  totals = tf.reduce_sum(weighted, axis=0, keepdims=True)
  return tf.cast(tf.transpose(tf.math.divide_no_nan(weighted, totals)), tf.float32)


def is_singular(matrix):
  """Whether the smallest singular value is <= 1e-6 x the largest (a bool tensor)."""
  values = tf.linalg.svd(tf.cast(matrix, tf.float64), compute_uv=False)
  return values[-1] <= SINGULAR_TOLERANCE * values[0]
