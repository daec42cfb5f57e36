"""FedExP's extrapolated server step (Jhunjhunwala et al. 2023, Eqs. 8-10), NumPy, float64.

Lists hold one array per trainable variable. Client i of the round's M sends its update
Δ_i = θ_i - θ^{t-1} (the paper's pseudo-gradient with the opposite sign); with weights
p_i summing to 1 over the round's clients (the paper: 1/M; FedExP's and FNBench's code:
the clients' example counts, normalised), Δ̄ = Σ p_i Δ_i and

  η_g = max(1, Σ_i p_i ||Δ_i||² / (2 (||Δ̄||² + ε))),   θ^t = θ^{t-1} + η_g Δ̄,

which for p_i = 1/M is the paper's max(1, Σ_i ||Δ_i||² / (2M(||Δ̄||² + ε))). The model the
paper scores is the average of the last two iterates, (θ^t + θ^{t-1})/2
(``iterate_average``); the next round starts from θ^t.

FedExP's code puts M ε in the denominator, ||Δ̄||² + M ε, with ε decayed by 0.998² every
round (``decayed_epsilon``; pass M · ε). FNBench's code (the source of MaskedOptim's
Table 3) measures every Δ_i from, and extrapolates from, the INITIAL model θ^0 instead of
θ^{t-1}, with ε = 1e-3 fixed and no iterate averaging: ``server_update`` with
``reference`` θ^0, or ``reanchor`` to get its statistics from the usual ones.
"""

import numpy as np


def _flat(arrays) -> np.ndarray:
  return np.concatenate([np.asarray(a, np.float64).ravel() for a in arrays])


def _normalized(count: int, weights) -> np.ndarray:
  if not count:
    raise ValueError('FedExP needs at least one client update')
  if weights is None:
    return np.full(count, 1.0 / count)
  weights = np.asarray(weights, np.float64)
  if weights.shape != (count,) or np.any(weights < 0) or not weights.sum() > 0:
    raise ValueError(f'need {count} non-negative client weights, not all 0, got {weights}')
  return weights / weights.sum()


def update_statistics(updates, weights=None):
  """(Σ_i p_i ||Δ_i||², Δ̄ = Σ_i p_i Δ_i) of the round's updates (lists per client)."""
  p = _normalized(len(updates), weights)
  mean_squared_norm = float(sum(pi * np.sum(_flat(u) ** 2) for pi, u in zip(p, updates)))
  mean_update = [sum(pi * np.asarray(u[i], np.float64) for pi, u in zip(p, updates))
                 for i in range(len(updates[0]))]
  return mean_squared_norm, mean_update


def step_size(mean_squared_norm: float, squared_norm_of_mean: float,
              epsilon: float = 1e-3) -> float:
  """η_g = max(1, Σ_i p_i ||Δ_i||² / (2(||Δ̄||² + ε))) (Eqs. 8-10)."""
  if not epsilon >= 0:
    raise ValueError(f'FedExP needs epsilon >= 0, got {epsilon}')
  denominator = 2.0 * (float(squared_norm_of_mean) + epsilon)
  if denominator == 0.0:
    return 1.0  # Every update is 0: no step to scale.
  return max(1.0, float(mean_squared_norm) / denominator)


def server_update(reference, trained_models, weights=None, epsilon: float = 1e-3):
  """(θ^t = θ_ref + η_g Δ̄, η_g) with Δ_i = θ_i - θ_ref; θ_ref the received θ^{t-1} (the
  paper) or the initial model (FNBench's code)."""
  updates = [[np.asarray(t, np.float64) - np.asarray(r, np.float64)
              for t, r in zip(trained, reference)] for trained in trained_models]
  mean_squared_norm, mean_update = update_statistics(updates, weights)
  eta = step_size(mean_squared_norm, float(np.sum(_flat(mean_update) ** 2)), epsilon)
  return [np.asarray(r, np.float64) + eta * d for r, d in zip(reference, mean_update)], eta


def reanchor(mean_squared_norm: float, mean_update, offset):
  """The statistics of D + Δ_i from those of Δ_i, D = θ^{t-1} - θ^0 (FNBench's anchor):
  (Σ p_i ||D + Δ_i||², ||D + Δ̄||²) = (||D||² + 2<D, Δ̄> + Σ p_i ||Δ_i||², ||D + Δ̄||²)."""
  d, mean = _flat(offset), _flat(mean_update)
  return (float(d @ d + 2.0 * d @ mean + mean_squared_norm),
          float(np.sum((d + mean) ** 2)))


def iterate_average(current, previous=None) -> list:
  """(θ^t + θ^{t-1})/2, the model FedExP scores; ``current`` alone before a previous one."""
  if previous is None:
    return [np.asarray(c, np.float64) for c in current]
  return [(np.asarray(c, np.float64) + np.asarray(p, np.float64)) / 2.0
          for c, p in zip(current, previous)]


def decayed_epsilon(epsilon: float, round_index: int, decay: float = 0.998) -> float:
  """ε · decay^{2(t+1)} in round t = 0, 1, ... (FedExP's code decays ε before each round)."""
  return float(epsilon * decay ** (2 * (int(round_index) + 1)))
