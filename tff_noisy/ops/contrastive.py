"""LSC's local K-similarity contrastive term (§3.2, Eq. 2 of the paper).

Inside one mini-batch of m examples, a frozen encoder's L2-normalised embeddings pick
each example's K nearest neighbours (largest cosine, the example itself never one of
them); the client model's L2-normalised penultimate features z̄ then give

  L_CL,j = -log( sum_{k in N_j} exp(s_jk) / sum_{l != j} exp(s_jl) ),  s_jk = <z̄_j, z̄_k>/T,

all positives summed inside one log. Choices (docs/papers/lsc.md, ambiguities 1 and 7):

- ``exclude_self=True`` (default) drops l = j from the denominator, as the paper's text
  counts m - 1 pairs; ``False`` keeps it, as its Eq. 2 is written (s_jj = 1/T).
- K is clipped to m - 1 per batch (a partial last batch, or K >= the batch size): every
  other example of the batch is then a positive. A batch of fewer than 2 examples has
  no pairs and gives 0.
- Equal similarities rank by batch position (the lower index is the nearer).

``ops.contrastive_tf`` is the TensorFlow twin that client training runs.
"""

import numpy as np

_EPS = 1e-12  # Squared-norm floor of the L2 normalisation (as tf.math.l2_normalize).


def l2_normalize(x: np.ndarray) -> np.ndarray:
  """Rows of x divided by their L2 norm (a zero row stays zero)."""
  x = np.asarray(x, np.float64)
  return x / np.sqrt(np.maximum(np.sum(x * x, axis=-1, keepdims=True), _EPS))


def effective_k(k: int, batch_size: int) -> int:
  """K clipped to the other examples of a batch: min(K, m - 1), 0 if m < 2."""
  return max(min(int(k), batch_size - 1), 0)


def neighbour_mask(embeddings: np.ndarray, k: int) -> np.ndarray:
  """[m, m] boolean: row j marks the min(K, m - 1) nearest others of example j.

  Nearest by cosine of the embeddings (= smallest distance between the normalised ones).
  """
  embeddings = l2_normalize(embeddings)
  m = len(embeddings)
  k = effective_k(k, m)
  mask = np.zeros((m, m), bool)
  if not k:
    return mask
  similarity = embeddings @ embeddings.T
  np.fill_diagonal(similarity, -np.inf)
  nearest = np.argsort(-similarity, axis=1, kind='stable')[:, :k]
  np.put_along_axis(mask, nearest, True, axis=1)
  return mask


def _logsumexp(values: np.ndarray, where: np.ndarray) -> np.ndarray:
  """log sum_i exp(values_i) over the entries of each row that ``where`` marks."""
  masked = np.where(where, values, -np.inf)
  top = masked.max(axis=1, keepdims=True)
  return (top + np.log(np.sum(np.exp(masked - top), axis=1, keepdims=True)))[:, 0]


def k_similarity_loss(features, embeddings, k: int, temperature: float,
                      exclude_self: bool = True) -> np.ndarray:
  """L_CL,j of every example of one batch: [m] (LSC Eq. 2).

  Args:
    features: [m, d] the client model's penultimate features z^c (un-normalised).
    embeddings: [m, e] the frozen encoder's embeddings z^s of the same examples.
    k: neighbours K (clipped to m - 1, see the module doc).
    temperature: T > 0.
    exclude_self: drop l = j from the denominator (True) or keep it (Eq. 2 as written).
  """
  features = np.asarray(features)
  m = len(features)
  if m < 2:
    return np.zeros(m, np.float64)
  positives = neighbour_mask(embeddings, k)
  z = l2_normalize(features)
  similarity = z @ z.T / temperature
  others = ~np.eye(m, dtype=bool) if exclude_self else np.ones((m, m), bool)
  return _logsumexp(similarity, others) - _logsumexp(similarity, positives)


def neighbour_purity(embeddings, labels, k: int) -> tuple:
  """(neighbour pairs sharing a label, neighbour pairs) in one batch.

  With the true labels, the fraction is how often LSC's positives are truly of the
  same class (reporting only, never training).
  """
  mask = neighbour_mask(embeddings, k)
  labels = np.asarray(labels)
  same = labels[:, None] == labels[None, :]
  return int(np.sum(mask & same)), int(np.sum(mask))
