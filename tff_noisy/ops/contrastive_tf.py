"""TensorFlow twin of ``ops.contrastive.k_similarity_loss``, run in client training.

Same equation and choices (see ``ops.contrastive``); the batch size may be unknown until
run time. No gradient reaches the embeddings: the neighbour relation is a constant of
the step (LSC §3.2), only the client model's features are trained.

Terms left out of a sum are set to ``_MASKED`` rather than -inf: exp(_MASKED - s)
is exactly 0 next to any similarity |s| <= 1/T, and a row with no term left (a batch
of one) stays finite, so neither the value nor a gradient becomes NaN, without a
branch (a ``tf.cond`` per step costs more than the term itself on small models).
"""

import tensorflow as tf

_MASKED = -1e9


def k_similarity_loss(features, embeddings, k: int, temperature: float,
                      exclude_self: bool = True):
  """L_CL,j of every example of one batch: [m]; 0 for a batch of fewer than 2."""
  embeddings = tf.stop_gradient(tf.math.l2_normalize(tf.cast(embeddings, tf.float32), axis=1))
  features = tf.convert_to_tensor(features)
  m = tf.shape(features)[0]
  eye = tf.eye(m, dtype=tf.bool)
  cosine = tf.where(eye, float('-inf'), tf.matmul(embeddings, embeddings, transpose_b=True))
  k = tf.maximum(tf.minimum(k, m - 1), 0)
  _, nearest = tf.math.top_k(cosine, k=k)  # Ties: the lower index first.
  positives = tf.reduce_any(tf.cast(tf.one_hot(nearest, m), tf.bool), axis=1)
  z = tf.math.l2_normalize(features, axis=1)
  similarity = tf.matmul(z, z, transpose_b=True) / temperature
  denominator = tf.where(eye, _MASKED, similarity) if exclude_self else similarity
  loss = (tf.reduce_logsumexp(denominator, axis=1)
          - tf.reduce_logsumexp(tf.where(positives, similarity, _MASKED), axis=1))
  return tf.where(m >= 2, loss, tf.zeros_like(loss))
