"""SCAFFOLD's control variates (Karimireddy et al. 2020, Algorithm 1, option II), NumPy.

Lists hold one array per trainable variable. ``scaffold_tf`` holds the TensorFlow twins
of the client's two steps; the server's step runs here, on the server.

- A local step (line 10): y <- y - lr (g(y) - c_i + c): the optimiser's step on g, then
  the shift -lr (c - c_i). With momentum the shift stays outside it (as NIID-Bench's
  SCAFFOLD, Li et al. 2022, the MOON authors' benchmark: the plain step on the
  correction after the optimiser's on the gradient).
- The client's new control variate (line 12, option II):
  c_i+ = c_i - c + (x - y) / (K lr), x the received and y the trained weights after K
  local steps of rate lr; it sends Δc_i = c_i+ - c_i (line 13).
- The server (lines 16-17): c <- c + |S|/N · mean_S(Δc_i) = c + sum_S(Δc_i) / N, N the
  number of clients.
"""

import numpy as np


def step_shift(control, client_control, learning_rate: float) -> list:
  """-lr (c - c_i), per variable: with the plain step -lr g, y moves by -lr (g - c_i + c)
  (line 10)."""
  return [-learning_rate * (np.asarray(c) - np.asarray(ci))
          for c, ci in zip(control, client_control)]


def client_control_update(client_control, control, initial, trained, steps: int,
                          learning_rate: float) -> list:
  """c_i+ = c_i - c + (x - y)/(K lr) (Algorithm 1, line 12, option II)."""
  scale = 1.0 / (max(int(steps), 1) * learning_rate)
  return [ci - c + (x - y) * scale
          for ci, c, x, y in zip(client_control, control, initial, trained)]


def server_control_update(control, delta_sum, num_clients: int) -> list:
  """c + sum_S(Δc_i)/N, i.e. c + |S|/N · mean_S(Δc_i) (Algorithm 1, line 17)."""
  return [np.asarray(c) + np.asarray(d) / num_clients for c, d in zip(control, delta_sum)]
