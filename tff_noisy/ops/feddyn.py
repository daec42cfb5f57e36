"""FedDyn's dynamic regulariser (Acar et al. 2021, Algorithm 1), NumPy.

Lists hold one array per trainable variable. θ^{t-1} is the model the server sent, θ the
client's weights while it trains and θ_k^t after its local steps. Each client keeps
g_k = ∇L_k(θ_k^{t-1}), zero before its first round; the server keeps h, zero at the start;
both have the model's shapes.

- The client's objective: L_k(θ) - <g_k, θ> + (α/2)||θ - θ^{t-1}||². A step adds
  -g_k + α(θ - θ^{t-1}) to the loss's gradients (``gradient_terms``).
- The client's state: g_k <- g_k - α(θ_k^t - θ^{t-1}) (``client_state_update``).
- The server: h^t = h^{t-1} - (α/m) Σ_{k∈P_t} (θ_k^t - θ^{t-1}), m the number of ALL
  clients (the authors' code divides by it too), and
  θ^t = (1/|P_t|) Σ_{k∈P_t} θ_k^t - h^t/α (``server_state_update``, ``server_model``;
  ``server_step`` from the round's unweighted mean update).

FedEFC's code (Yu et al. 2025, the source of its Tables 2-3) runs another rule under the
name FedDyn: clients train as FedAvg's (no term), the server keeps for each client the sum
c_k of θ^{t-1} - θ_k^t over its rounds (``client_state_update`` with α = 1), and
θ^t = (1/|P_t|) Σ_{k∈P_t} θ_k^t - μ Σ_{k∈P_t} c_k, μ = 1e-5 (``fedefc_server_model``,
``fedefc_server_step``).
``feddyn_tf`` holds the TensorFlow twins of the client's terms and state update.
"""

import numpy as np


def _check_alpha(alpha: float):
  if not alpha >= 0:
    raise ValueError(f'FedDyn needs alpha >= 0, got {alpha}')


def penalty(weights, received, gradient_state, alpha: float) -> float:
  """-<g_k, θ> + (α/2)||θ - θ^{t-1}||², the terms Algorithm 1 adds to L_k (a scalar)."""
  _check_alpha(alpha)
  total = 0.0
  for w, r, g in zip(weights, received, gradient_state):
    w, r, g = (np.asarray(a, np.float64) for a in (w, r, g))
    total += -np.sum(g * w) + 0.5 * alpha * np.sum((w - r) ** 2)
  return float(total)


def gradient_terms(weights, received, gradient_state, alpha: float) -> list:
  """-g_k + α(θ - θ^{t-1}) per variable: ``penalty``'s gradient, added to the loss's at
  every local step (Algorithm 1, the client's objective)."""
  _check_alpha(alpha)
  return [-np.asarray(g) + alpha * (np.asarray(w) - np.asarray(r))
          for w, r, g in zip(weights, received, gradient_state)]


def client_state_update(gradient_state, received, trained, alpha: float) -> list:
  """g_k <- g_k - α(θ_k^t - θ^{t-1}) (Algorithm 1, the client's state update). With α = 1
  it is FedEFC's control c_k <- c_k + θ^{t-1} - θ_k^t."""
  _check_alpha(alpha)
  return [np.asarray(g) - alpha * (np.asarray(t) - np.asarray(r))
          for g, r, t in zip(gradient_state, received, trained)]


def server_state_update(server_state, received, trained_models, alpha: float,
                        num_clients: int) -> list:
  """h^t = h^{t-1} - (α/m) Σ_{P_t}(θ_k^t - θ^{t-1}) (Algorithm 1, the server's state);
  ``trained_models``: the round's clients' θ_k^t, ``num_clients``: m, all the clients."""
  _check_alpha(alpha)
  if num_clients < len(trained_models) or not trained_models:
    raise ValueError(f'{len(trained_models)} trained models for m = {num_clients} clients')
  drift = [sum(np.asarray(t[i], np.float64) - np.asarray(r, np.float64)
               for t in trained_models) for i, r in enumerate(received)]
  return [np.asarray(h, np.float64) - alpha / num_clients * d
          for h, d in zip(server_state, drift)]


def server_model(trained_models, server_state, alpha: float) -> list:
  """θ^t = (1/|P_t|) Σ_{P_t} θ_k^t - h^t/α (Algorithm 1, the server model, unweighted)."""
  if not alpha > 0:
    raise ValueError(f'the server model divides by alpha > 0, got {alpha}')
  mean = [np.mean([np.asarray(t[i], np.float64) for t in trained_models], axis=0)
          for i in range(len(server_state))]
  return [m - np.asarray(h, np.float64) / alpha for m, h in zip(mean, server_state)]


def fedefc_server_model(trained_models, controls, mu: float = 1e-5) -> list:
  """FedEFC's code's FedDyn: (1/|P_t|) Σ_{P_t} θ_k^t - μ Σ_{P_t} c_k, ``controls`` the
  round's clients' c_k after this round's ``client_state_update(c_k, θ^{t-1}, θ_k^t, 1)``."""
  if len(controls) != len(trained_models) or not trained_models:
    raise ValueError(f'{len(controls)} controls for {len(trained_models)} trained models')
  count = len(trained_models[0])
  mean = [np.mean([np.asarray(t[i], np.float64) for t in trained_models], axis=0)
          for i in range(count)]
  return [m - mu * sum(np.asarray(c[i], np.float64) for c in controls)
          for i, m in enumerate(mean)]


def server_step(received, mean_update, count: int, server_state, alpha: float,
                num_clients: int):
  """(θ^t, h^t) from the round's aggregate: the unweighted mean update Δ̄ of its
  ``count`` = |P_t| clients. Σ_{P_t}(θ_k^t - θ^{t-1}) = |P_t| Δ̄ and mean θ_k^t = θ^{t-1} + Δ̄,
  so this is ``server_state_update`` then ``server_model``."""
  _check_alpha(alpha)
  if not 0 < count <= num_clients:
    raise ValueError(f'{count} clients took part out of m = {num_clients}')
  if not alpha > 0:
    raise ValueError(f'the server model divides by alpha > 0, got {alpha}')
  h = [np.asarray(s, np.float64) - alpha * count / num_clients * np.asarray(d, np.float64)
       for s, d in zip(server_state, mean_update)]
  model = [np.asarray(r, np.float64) + np.asarray(d, np.float64) - s / alpha
           for r, d, s in zip(received, mean_update, h)]
  return model, h


def fedefc_server_step(received, mean_update, control_sum, mu: float = 1e-5) -> list:
  """``fedefc_server_model`` from the aggregate: θ^{t-1} + Δ̄ - μ Σ_{P_t} c_k, Δ̄ the
  unweighted mean update and ``control_sum`` the sum of the round's clients' new c_k."""
  return [np.asarray(r, np.float64) + np.asarray(d, np.float64) - mu * np.asarray(c, np.float64)
          for r, d, c in zip(received, mean_update, control_sum)]
