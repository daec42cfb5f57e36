"""TensorFlow twins of ``akd`` (FedLN's AKD), run in a distilling client's training:
the teacher embeddings are constants of the step (no gradient flows into them)."""

import tensorflow as tf

from tff_noisy.ops import losses
from tff_noisy.ops.akd import ALPHA


def embedding_mae(student, teacher):
  """``akd.embedding_mae``: (1/D) Σ_d |g_d − e_d| per example [B]."""
  teacher = tf.stop_gradient(tf.cast(teacher, student.dtype))
  return tf.reduce_mean(tf.abs(teacher - student), axis=-1)


def akd_loss(labels, logits, student, teacher, alpha: float = ALPHA, distil=True):
  """``akd.akd_loss`` per example [B]; ``distil`` a Python or boolean tensor flag."""
  ce = losses.cross_entropy(labels, logits)
  weight = alpha * tf.cast(distil, logits.dtype)
  return ce + weight * embedding_mae(student, teacher)
