"""FedRN (Kim et al., CIKM 2022: k-reliable neighbours) in NumPy, as its released code
(github ElvinKim/FedRN, ``main_fed_LNL.py`` and ``LocalUpdateFedRN``) runs it; FNBench
(Sprinter1999/FNBench) carries the same code.

After warm-up, before client i trains in a round:

- The server holds, for every client j, its last local model, its data expertise E_j
  (the accuracy of that model on j's own training data against j's observed labels) and
  its output o_j on one fixed Gaussian-noise input shared by all clients.
- Reliability (the paper's reliability score): S_ij = cos(o_i, o_j); Ê, Ŝ_i· min-max
  scaled over all N clients (client i included); R_ij = α Ê_j + (1 − α) Ŝ_ij for j ≠ i,
  and R_ii = α Ê_i + (1 − α) (the code's self score: a similarity of 1).
- Neighbours: the k clients j ≠ i with the largest R_ij (ties: the lower index).
- Client i fits the DivideMix GMM (``dividemix.clean_probability``) to its own last local
  model's losses, keeps w > τ as clean (all of its data if none), fine-tunes each
  neighbour model's classifier head on those examples (one epoch), fits the GMM to each
  fine-tuned neighbour's losses, and ensembles: w̄ = Σ_m R_m w_m / Σ_m R_m over itself and
  its neighbours. The examples with w̄ > τ (all, if none) are the clean set it trains the
  global model on, with cross-entropy, for the round's local epochs.

``finetune_head`` is the neighbour's head fine-tuning (the code's ``finetune_head``: SGD
on the linear classifier alone, the body frozen) on the body's features of the client's
examples.
"""

import numpy as np
import scipy.special

from tff_noisy.ops import common
from tff_noisy.ops import detection
from tff_noisy.ops import dividemix

COSINE_EPS = 1e-8  # torch.nn.CosineSimilarity's default.


def expertise(logits, labels) -> float:
  """E_j: the share of a client's examples whose argmax prediction equals the observed
  label (the code's ``set_expertise``, on all of its data); 0 for no example."""
  labels = np.asarray(labels)
  if not labels.size:
    return 0.0
  return float(np.mean(np.argmax(np.asarray(logits), axis=-1) == labels))


def cosine_similarity(a, b, eps: float = COSINE_EPS) -> np.ndarray:
  """cos(a, b) = a·b / max(‖a‖ ‖b‖, ε) over the last axis (torch's definition)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
  return np.sum(a * b, axis=-1) / np.maximum(norms, eps)


def reliability_scores(client: int, expertise_values, probe_outputs,
                       alpha: float) -> np.ndarray:
  """R_i· [N] (module doc): ``expertise_values`` [N], ``probe_outputs`` [N, C] every
  client's output on the shared noise input; entry ``client`` is the self score."""
  if not 0.0 <= alpha <= 1.0:
    raise ValueError(f'alpha must be in [0, 1], got {alpha}')
  outputs = np.asarray(probe_outputs, np.float64)
  similarity = cosine_similarity(outputs[client][None, :], outputs)
  scaled_e = detection.minmax_columns(np.asarray(expertise_values, np.float64)[:, None])[:, 0]
  scaled_s = detection.minmax_columns(similarity[:, None])[:, 0]
  scores = alpha * scaled_e + (1.0 - alpha) * scaled_s
  scores[client] = alpha * scaled_e[client] + (1.0 - alpha)
  return scores


def select_neighbors(client: int, scores, k: int) -> np.ndarray:
  """The ``k`` clients other than ``client`` with the largest score, best first; ties by
  the lower index (the code's stable sort)."""
  scores = np.asarray(scores, np.float64)
  if not 0 <= k < len(scores):
    raise ValueError(f'k must be in [0, {len(scores) - 1}] for {len(scores)} clients, got {k}')
  order = np.argsort(-scores, kind='stable')
  return order[order != client][:k]


def ensemble_clean_probability(probabilities, scores) -> np.ndarray:
  """w̄ [n] = Σ_m R_m w_m / Σ_m R_m over the rows of ``probabilities`` [M, n] (the client's
  own first, then its neighbours'), ``scores`` [M] their reliability; equal weights if
  every score is 0."""
  weights = common.normalize_weights(scores)
  return weights @ np.asarray(probabilities, np.float64)


def clean_mask(probability, threshold: float = 0.5) -> np.ndarray:
  """bool [n]: w > τ; every example when none passes (the code's ``get_clean_idx``)."""
  mask = dividemix.divide(probability, threshold)
  return mask if mask.any() else np.ones_like(mask)


def clean_examples(own_losses, neighbor_losses, client_score: float, neighbor_scores,
                   threshold: float = 0.5, seed: int = 0) -> np.ndarray:
  """bool [n]: the clean set client i trains on, from per-example losses under its own
  last local model [n] and under each fine-tuned neighbour [k, n] (module doc)."""
  probabilities = [dividemix.clean_probability(own_losses, seed)]
  probabilities += [dividemix.clean_probability(losses, seed) for losses in neighbor_losses]
  scores = np.concatenate([[client_score], np.asarray(neighbor_scores, np.float64)])
  return clean_mask(ensemble_clean_probability(probabilities, scores), threshold)


def cross_entropy(logits, labels) -> np.ndarray:
  """Per-example −log softmax(z)_y [n] (the code's ``CrossEntropyLoss(reduction='none')``)."""
  log_p = scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)
  return -log_p[np.arange(len(log_p)), np.asarray(labels, np.int64)]


def finetune_head(features, labels, kernel, bias, batches, lr: float, momentum: float = 0.0,
                  weight_decay: float = 0.0) -> tuple:
  """``(kernel, bias)`` of a linear head z = φ W + b after one pass of SGD on the mean
  cross-entropy over each of ``batches`` (index arrays into ``features`` [n, D] and
  ``labels`` [n]) in turn, the body frozen (the code's ``finetune_head``). torch's SGD:
  g ← ∇ + λ θ, m ← μ m + g (m = g at the first step), θ ← θ − η m."""
  features = np.asarray(features, np.float64)
  labels = np.asarray(labels, np.int64)
  params = [np.array(kernel, np.float64), np.array(bias, np.float64)]
  buffers = None
  for batch in batches:
    phi = features[batch]
    probs = scipy.special.softmax(phi @ params[0] + params[1], axis=-1)
    probs[np.arange(len(batch)), labels[batch]] -= 1.0
    delta = probs / len(batch)  # d mean CE / d z.
    grads = [phi.T @ delta + weight_decay * params[0],
             delta.sum(axis=0) + weight_decay * params[1]]
    buffers = grads if buffers is None else [momentum * m + g for m, g in zip(buffers, grads)]
    params = [p - lr * m for p, m in zip(params, buffers)]
  return params[0], params[1]
