"""FOCUS's maths in NumPy (Chen et al. 2020, "FOCUS: Dealing with label quality disparity
in federated learning", arXiv 2001.11359; docs/methods.md says which details are read
from where).

A round's client k has two losses: LL_k, the mean cross-entropy of the model it received
on its own (possibly noisy) labels, which it reports, and LS_k, the mean cross-entropy of
its trained local model on the server's clean labelled benchmark set. Their sum is the
mutual cross-entropy E_k = LL_k + LS_k: a client whose labels disagree with the benchmark's
has both losses high. Its credibility among the round's J clients is

    C_k = 1 - exp(α E_k) / Σ_j exp(α E_j),

and the aggregation weights are w_k = C_k n_k / Σ_j C_j n_j (n_k: its examples), or
C_k / Σ_j C_j without the examples.
"""

from typing import NamedTuple

import numpy as np
import scipy.special

OK = 'ok'
TOO_FEW = 'fewer than 2 usable clients: credibility is undefined, weights by examples'


def mutual_cross_entropy(local_data_losses, benchmark_losses) -> np.ndarray:
  """E_k = LL_k + LS_k of the module doc, per client."""
  return np.asarray(local_data_losses, np.float64) + np.asarray(benchmark_losses, np.float64)


def credibility(mutual: np.ndarray, alpha: float) -> np.ndarray:
  """C_k = 1 - softmax(α E)_k over the round's clients (computed stably)."""
  return 1.0 - scipy.special.softmax(alpha * np.asarray(mutual, np.float64))


class Weights(NamedTuple):
  weights: np.ndarray  # [K] aggregation weights, summing to 1 (0 for an unusable client).
  credibility: np.ndarray  # [K] C_k; NaN for an unusable client.
  status: str


def weights(local_data_losses, benchmark_losses, sizes, *, alpha: float,
            times_examples: bool = True) -> Weights:
  """The round's weights from each client's LL_k, LS_k and n_k (module doc).

  A client with a non-finite loss or no examples is unusable: weight 0, left out of the
  softmax. With J >= 2 usable clients the credibilities sum to J - 1 > 0; with fewer (a
  lone client's credibility is 1 - 1 = 0) the usable clients are weighted by their
  examples and ``status`` says so.
  """
  mutual = mutual_cross_entropy(local_data_losses, benchmark_losses)
  sizes = np.asarray(sizes, np.float64)
  usable = np.isfinite(mutual) & (sizes > 0)
  scores = np.full(len(mutual), np.nan)
  result = np.zeros(len(mutual))
  if usable.sum() >= 2:
    scores[usable] = credibility(mutual[usable], alpha)
    result[usable] = scores[usable] * (sizes[usable] if times_examples else 1.0)
    return Weights(result / result.sum(), scores, OK)
  result = np.where(usable, sizes, 0.0)
  total = result.sum()
  return Weights(result / total if total > 0 else result, scores, TOO_FEW)
