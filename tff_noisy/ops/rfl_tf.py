"""TensorFlow twins of ``rfl`` for a client's training step: the small-loss selection, the
similarity agreement, the training labels, the per-example loss and the local centroid
update. The selection and the labels are constants of the step (no gradient flows through
a ranking or an argmax)."""

import tensorflow as tf

from tff_noisy.ops import losses

COSINE_EPS = 1e-8


def cosine_similarity(a, b):
  """``fedrn.cosine_similarity``: a·b / max(‖a‖ ‖b‖, ε) over the last axis."""
  norms = tf.norm(a, axis=-1) * tf.norm(b, axis=-1)
  return tf.reduce_sum(a * b, axis=-1) / tf.maximum(norms, COSINE_EPS)


def class_means(features, labels, num_classes, mask=None):
  """``rfl.class_means``: [C, d] per-class mean of ``features`` over ``mask`` (float [B])."""
  ids = tf.cast(labels, tf.int32)
  weight = tf.ones(tf.shape(ids), features.dtype) if mask is None else tf.cast(
      mask, features.dtype)
  sums = tf.math.unsorted_segment_sum(features * weight[:, None], ids, num_classes)
  counts = tf.math.unsorted_segment_sum(weight, ids, num_classes)
  return sums / tf.maximum(counts, 1.0)[:, None]


def similarity_labels(features, centroids):
  """``rfl.similarity_labels``: argmax_c cos(f^c, h_i) [B], int32."""
  similarity = cosine_similarity(features[:, None, :], centroids[None, :, :])
  return tf.argmax(similarity, axis=1, output_type=tf.int32)


def selected_mask(logits, labels, forget_rate):
  """``rfl.selected_mask`` as float32 [B]: the ⌊(1 − τ) B⌋ (at least 1) smallest CEs."""
  per_example = tf.stop_gradient(losses.cross_entropy(labels, logits))
  batch = tf.shape(per_example)[0]
  kept = tf.maximum(1, tf.cast(tf.math.floor(
      (1.0 - tf.cast(forget_rate, tf.float32)) * tf.cast(batch, tf.float32)), tf.int32))
  order = tf.argsort(per_example, stable=True)
  return tf.scatter_nd(order[:kept, None], tf.ones([kept]), [batch])


def agreement_mask(features, labels, centroids, selected):
  """``rfl.agreement_mask`` as float32 [B]."""
  agree = tf.equal(similarity_labels(tf.stop_gradient(features), centroids),
                   tf.cast(labels, tf.int32))
  return tf.cast(selected, tf.float32) * tf.cast(agree, tf.float32)


def training_labels(labels, pseudo_labels, agree, use_pseudo_labels):
  """``rfl.training_labels``; ``use_pseudo_labels`` a bool scalar, t >= T_pl."""
  labels = tf.cast(labels, tf.int32)
  pseudo = tf.where(agree > 0, labels, tf.cast(pseudo_labels, tf.int32))
  return tf.where(use_pseudo_labels, pseudo, labels)


def lambda_cen_weight(round_index, lambda_cen, pseudo_label_round):
  """``rfl.lambda_cen_weight`` in float32."""
  t = tf.cast(round_index, tf.float32)
  ramp = tf.cast(lambda_cen, tf.float32) * t / tf.cast(pseudo_label_round, tf.float32)
  return tf.where(t < tf.cast(pseudo_label_round, tf.float32), ramp,
                  tf.cast(lambda_cen, tf.float32))


def per_example_loss(logits, features, labels, targets, centroids, selected, agree,
                     lambda_cen, lambda_e, centroid_gradient: bool = False):
  """``rfl.per_example_loss``; with ``centroid_gradient`` False (the released code) the
  features are a constant of the centroid term, so it moves no weight."""
  if not centroid_gradient:
    features = tf.stop_gradient(features)
  sel = tf.cast(selected, logits.dtype)
  both = sel * tf.cast(agree, logits.dtype)
  batch = tf.cast(tf.shape(logits)[0], logits.dtype)
  count = tf.maximum(tf.reduce_sum(sel), 1.0)
  log_p = tf.nn.log_softmax(logits)
  entropy = -tf.reduce_sum(tf.exp(log_p) * log_p, axis=-1)
  ce = losses.cross_entropy(targets, logits)
  own = tf.gather(tf.cast(centroids, features.dtype), tf.cast(labels, tf.int32))
  distances = tf.reduce_sum(tf.square(features - own), axis=-1)
  return (batch / count * sel * (ce + lambda_e * entropy)
          + batch * tf.cast(lambda_cen, logits.dtype) * both * distances)


def update_centroids(centroids, features, labels, selected, num_classes):
  """``rfl.update_centroids`` with the batch means of the selected examples' features."""
  means = class_means(tf.stop_gradient(features), labels, num_classes, selected)
  weight = tf.square(cosine_similarity(centroids, means))[:, None]
  return (1.0 - weight) * centroids + weight * means
