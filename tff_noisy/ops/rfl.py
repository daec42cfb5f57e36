"""RFL, "Robust Federated Learning with Noisy Labels" (Yang et al., IEEE Intelligent Systems
2022, arXiv 2012.01700), in NumPy, as FNBench runs it (github Sprinter1999/FNBench,
``LocalUpdateRFL`` and the server step of ``main_fed_LNL.py``; the same code as the
public implementation jangsoohyuk/Robust-Federated-Learning-with-Noisy-Labels).

The server keeps global class centroids f_G [C, d] in the model's feature space (a
standard-normal draw before round 1). A client in round t (0-based):

- at the round's start, with the global model in inference mode: the pseudo-labels
  ŷ_i = argmax of the global model's logits on every local example; in round 0 only, its
  local centroids f_k are the per-class mean features of its examples by observed label
  (a class it lacks: 0); from round 1 on, f_k = f_G;
- in every step, on a batch of B examples: the ⌊(1 − τ(t)) B⌋ smallest-CE examples by the
  observed label are selected (τ(t): Co-teaching's schedule, ``coteaching.forget_rate``);
  a selected example agrees when its similarity label ỹ_i = argmax_c cos(f_k^c, h_i)
  equals its label y_i (h_i its feature); it trains on y_i if t < T_pl or it agrees, else
  on ŷ_i; the loss is
  L = mean_sel CE(z_i, label_i) + λ_cen(t) Σ_{sel, agree} ‖h_i − f_k^{y_i}‖²
      + λ_e mean_sel H(softmax(z_i)),
  λ_cen(t) = λ_cen t / T_pl for t < T_pl, then λ_cen; after the step each class's
  centroid moves to the selected examples' mean feature f̂^c of that class in the batch,
  f_k^c ← (1 − s²) f_k^c + s² f̂^c with s = cos(f_k^c, f̂^c) (0 where the class is absent);
- it sends f_k with its model; the server sets f_G^c = Σ_k s_k f_k^c / Σ_k s_k with
  s_k = cos(f_G^c, f_k^c).

The released code detaches the features before the loss, so the centroid term moves no
weight; ``rfl_tf`` keeps that as the default and can let its gradient through.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import coteaching
from tff_noisy.ops import fedrn


def class_means(features, labels, num_classes: int, mask=None) -> np.ndarray:
  """[C, d]: the mean feature of each class's examples (those in ``mask`` if given); 0 for
  a class without one (the code's count floored at 1)."""
  features = np.asarray(features, np.float64)
  labels = np.asarray(labels, np.int64)
  keep = np.ones(len(labels), bool) if mask is None else np.asarray(mask, bool)
  sums = np.zeros((num_classes, features.shape[1]))
  np.add.at(sums, labels[keep], features[keep])
  counts = np.bincount(labels[keep], minlength=num_classes)
  return sums / np.maximum(counts, 1)[:, None]


def similarity_labels(features, centroids) -> np.ndarray:
  """ỹ [B]: argmax_c cos(f^c, h_i) (the first class on a tie)."""
  features = np.asarray(features, np.float64)
  centroids = np.asarray(centroids, np.float64)
  return np.argmax(fedrn.cosine_similarity(features[:, None, :], centroids[None, :, :]), axis=1)


def cross_entropy(logits, labels) -> np.ndarray:
  return coteaching.cross_entropy(labels, logits)


def selected_mask(logits, labels, forget_rate: float) -> np.ndarray:
  """bool [B]: the ⌊(1 − τ) B⌋ (at least 1) smallest cross-entropies by the observed label
  (``coteaching.small_loss_mask``)."""
  losses = cross_entropy(logits, labels)
  return coteaching.small_loss_mask(losses, coteaching.num_remembered(len(losses), forget_rate))


def agreement_mask(features, labels, centroids, selected) -> np.ndarray:
  """bool [B]: selected examples whose similarity label equals the observed one."""
  agree = similarity_labels(features, centroids) == np.asarray(labels)
  return np.asarray(selected, bool) & agree


def training_labels(labels, pseudo_labels, agree, round_index: int,
                    pseudo_label_round: int) -> np.ndarray:
  """The label each example trains on: y before round T_pl or where it agrees, else the
  global model's ŷ (global-guided pseudo-labelling)."""
  labels = np.asarray(labels)
  if round_index < pseudo_label_round:
    return labels.copy()
  return np.where(np.asarray(agree, bool), labels, np.asarray(pseudo_labels))


def lambda_cen_weight(round_index: int, lambda_cen: float, pseudo_label_round: int) -> float:
  """λ_cen(t) = λ_cen t / T_pl for t < T_pl (0 in round 0), then λ_cen."""
  if round_index < pseudo_label_round:
    return float(lambda_cen * round_index / pseudo_label_round)
  return float(lambda_cen)


def entropy(logits) -> np.ndarray:
  """H(softmax(z)) = −Σ_c p_c log p_c per row."""
  log_p = scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)
  return -np.sum(np.exp(log_p) * log_p, axis=-1)


def centroid_distances(features, labels, centroids) -> np.ndarray:
  """‖h_i − f^{y_i}‖² per row."""
  diff = np.asarray(features, np.float64) - np.asarray(centroids, np.float64)[np.asarray(labels)]
  return np.sum(diff ** 2, axis=-1)


def rfl_loss(logits, features, labels, targets, centroids, selected, agree,
             lambda_cen: float, lambda_e: float) -> float:
  """L = mean_sel CE(z, target) + λ_cen Σ_{sel ∧ agree} ‖h − f^y‖² + λ_e mean_sel H (module
  doc); ``targets`` from ``training_labels``, λ_cen already scheduled."""
  sel = np.asarray(selected, bool)
  both = sel & np.asarray(agree, bool)
  ce = cross_entropy(logits, targets)
  distances = centroid_distances(features, labels, centroids)
  return float(np.mean(ce[sel]) + lambda_cen * np.sum(distances[both])
               + lambda_e * np.mean(entropy(logits)[sel]))


def per_example_loss(logits, features, labels, targets, centroids, selected, agree,
                     lambda_cen: float, lambda_e: float) -> np.ndarray:
  """ℓ [B] with mean ``rfl_loss``: (B/n) s_i (CE_i + λ_e H_i) + B λ_cen s_i a_i D_i."""
  sel = np.asarray(selected, np.float64)
  both = sel * np.asarray(agree, np.float64)
  batch, count = len(sel), max(sel.sum(), 1.0)
  ce = cross_entropy(logits, targets)
  distances = centroid_distances(features, labels, centroids)
  return (batch / count * sel * (ce + lambda_e * entropy(logits))
          + batch * lambda_cen * both * distances)


def update_centroids(centroids, batch_means) -> np.ndarray:
  """f^c ← (1 − s²) f^c + s² f̂^c, s = cos(f^c, f̂^c) per class; a class absent from the
  batch (f̂^c = 0) keeps its centroid."""
  centroids = np.asarray(centroids, np.float64)
  batch_means = np.asarray(batch_means, np.float64)
  weight = fedrn.cosine_similarity(centroids, batch_means)[:, None] ** 2
  return (1.0 - weight) * centroids + weight * batch_means


def aggregate_centroids(global_centroids, local_centroids, counts=None) -> np.ndarray:
  """The server's f_G [C, d] from the round's ``local_centroids`` [K, C, d].

  ``counts`` None: Σ_k s_k f_k^c / Σ_k s_k, s_k = cos(f_G^c, f_k^c) (the released code);
  a class whose similarities sum to 0 takes the plain mean. ``counts`` [K, C] (each
  client's number of examples of the class): the count-weighted mean, the old f_G^c where
  no client has the class.
  """
  global_centroids = np.asarray(global_centroids, np.float64)
  local = np.asarray(local_centroids, np.float64)
  if counts is None:
    weights = fedrn.cosine_similarity(global_centroids[None], local)  # [K, C]
    total = weights.sum(axis=0)
    fallback = local.mean(axis=0)
    with np.errstate(invalid='ignore', divide='ignore'):
      weighted = np.einsum('kc,kcd->cd', weights, local) / total[:, None]
    return np.where((total != 0)[:, None], weighted, fallback)
  counts = np.asarray(counts, np.float64)
  total = counts.sum(axis=0)
  weighted = np.einsum('kc,kcd->cd', counts, local) / np.maximum(total, 1e-300)[:, None]
  return np.where((total > 0)[:, None], weighted, global_centroids)
