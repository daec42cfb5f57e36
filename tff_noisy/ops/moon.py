"""MOON's model-contrastive term (Li, He & Song 2021, Eq. 3), NumPy.

For an example's representation z under the local model being trained, z_glob under the
received global model and z_prev under the client's previous local model,

  l_con = -log( exp(sim(z, z_glob)/T) / (exp(sim(z, z_glob)/T) + exp(sim(z, z_prev)/T)) )
        = log(1 + exp((sim(z, z_prev) - sim(z, z_glob))/T)),

sim the cosine similarity (rows L2-normalised as ``contrastive.l2_normalize``: a zero row
has similarity 0). ``moon_tf`` holds the TensorFlow twin the clients train with.
"""

import numpy as np

from tff_noisy.ops import contrastive


def cosine_similarity(a, b) -> np.ndarray:
  """Row-wise cosine of ``a`` and ``b`` [B, D] -> [B]."""
  return np.sum(contrastive.l2_normalize(a) * contrastive.l2_normalize(b), axis=-1)


def model_contrastive_loss(features, global_features, previous_features,
                           temperature: float) -> np.ndarray:
  """l_con per example [B] (Eq. 3)."""
  positive = cosine_similarity(features, global_features) / temperature
  negative = cosine_similarity(features, previous_features) / temperature
  return np.logaddexp(0.0, negative - positive)
