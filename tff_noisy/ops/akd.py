"""FedLN's adaptive knowledge distillation, AKD, in NumPy (Tsouvalas et al., ACM TIST
2023, "Labeling Chaos to Learning Harmony"; as the released code
FederatedML/FedLN ``fedln__akd.py`` and ``utils/distiller.py`` implement it).

AKD runs on the clients, not on the server. A frozen pretrained encoder g (the code
reads precomputed 512-d embeddings of every training image, as NNC does) is the teacher;
the student is the client's model with one extra linear head h on its pooled features,
e = h(φ(x)) of the teacher's width. Per client:

1. Once, in round ``distil_round`` (the code's 1, the first round): the noise estimate
   n̂ = (1/N) Σ_i 1[v_i ≠ ŷ_i], with v_i the majority label of the k = 10 nearest
   teacher embeddings among the client's own (itself included), set to 0 below 0.15
   (:func:`knn_noise_estimate`, on ``knn.knn_vote``). The client distils from then on
   if n̂ > 0 ("adaptive": which clients distil); n̂'s value is used no further.
2. Distilling clients train on, per example (:func:`akd_loss`),
   −log softmax(z)_ŷ + α · (1/D) Σ_d |g_d(x) − e_d|, α = 10, the observed (noisy) ŷ;
   the others on −log softmax(z)_ŷ. No softmax or temperature enters the distillation
   (the code's ``temperature=4.0`` is never used).
3. The head h never leaves the client (the code appends it to the received weights and
   keeps it); the server averages the shared weights by examples (plain FedAvg; no
   noise-based client weights).

``akd_tf`` holds the TensorFlow twins used in training.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import common
from tff_noisy.ops import knn

ALPHA = 10.0  # α, the distillation weight (``Distiller.compile(alpha=10.0)``).
NEIGHBORS = 10  # k of the noise estimate (``--knn_neighbors``).
NOISE_THRESHOLD = 0.15  # Estimates below it are 0 (``noise_theshold``).
DISTIL_ROUND = 1  # The round of the estimate (``--distil_round``; rounds from 1).
EMBEDDING_DIM = 512  # The teacher's width (``--embeddings_dims``).


def knn_noise_estimate(embeddings, labels, k: int = NEIGHBORS,
                       threshold: float = NOISE_THRESHOLD, seed: int = 0,
                       num_classes=None) -> float:
  """n̂ of step 1: the share of labels the k-NN vote on the teacher's embeddings
  [N, D] changes, 0 below ``threshold`` (ties of the vote at random, seeded)."""
  if not 0 <= threshold <= 1:
    raise ValueError(f'threshold must be in [0, 1], got {threshold}')
  labels = np.asarray(labels)
  votes = knn.knn_vote(embeddings, labels, k, include_self=True, seed=seed,
                       num_classes=num_classes)
  estimate = float(np.mean(votes != labels))
  return estimate if estimate >= threshold else 0.0


def distils(estimate: float) -> bool:
  """Whether a client with noise estimate n̂ distils (the code: n̂ > 0)."""
  return bool(estimate > 0.0)


def embedding_mae(student, teacher) -> np.ndarray:
  """(1/D) Σ_d |g_d − e_d| per example [B] (Keras ``MeanAbsoluteError`` per row)."""
  return np.mean(np.abs(np.asarray(teacher, np.float64) - np.asarray(student, np.float64)),
                 axis=-1)


def akd_loss(logits, labels, student, teacher, alpha: float = ALPHA,
             distil: bool = True) -> np.ndarray:
  """CE(z, ŷ) + α·MAE(e, g) per example [B] (step 2); the CE alone if not ``distil``."""
  labels = common.check_labels(labels, np.shape(logits)[-1])
  log_p = scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)
  ce = -np.take_along_axis(log_p, labels[:, None], axis=1)[:, 0]
  if not distil:
    return ce
  return ce + alpha * embedding_mae(student, teacher)


def fedavg_weights(num_examples) -> np.ndarray:
  """The server's weights: n_k / Σ n_k (step 3)."""
  return common.normalize_weights(num_examples)
