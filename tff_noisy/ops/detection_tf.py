"""The client's side of noisy-client detection in TensorFlow (twin of ``detection``).

Each client computes its per-class mean cross-entropy under the global model in
inference mode; tests hold it equal to ``detection.class_mean_losses``.
"""

import tensorflow as tf

from tff_noisy.ops import losses


def class_loss_sums(labels, logits, num_classes: int):
  """(sum of CE per observed class [C], count per class [C]) over one batch."""
  per_example = losses.cross_entropy(labels, logits)
  ids = tf.cast(labels, tf.int32)
  return (tf.math.unsorted_segment_sum(per_example, ids, num_classes),
          tf.math.unsorted_segment_sum(tf.ones_like(per_example), ids, num_classes))


def class_mean_losses(predict, dataset, num_classes: int):
  """[C] mean CE of ``predict(x)`` logits per observed class over ``dataset``; NaN if absent."""

  def step(sums_counts, batch):
    sums, counts = class_loss_sums(batch['y'], predict(batch['x']), num_classes)
    return sums_counts[0] + sums, sums_counts[1] + counts

  zeros = tf.zeros([num_classes], tf.float32)
  sums, counts = dataset.reduce((zeros, zeros), step)
  nan = tf.fill([num_classes], float('nan'))
  return tf.where(counts > 0, sums / tf.maximum(counts, 1.0), nan)
