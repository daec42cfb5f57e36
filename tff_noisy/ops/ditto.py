"""Ditto's personal models (Li et al. 2021, Algorithm 1), NumPy.

Lists hold one array per trainable variable. Besides its FedAvg update of the global model
w^t, each sampled client k trains a personal model v_k (kept between rounds; the authors'
code starts every v_k from w^0) on F_k(v_k) + (λ/2)||v_k - w^t||², w^t the model received
this round (fixed during the round): v_k <- v_k - η(∇F_k(v_k) + λ(v_k - w^t))
(``personal_step``). The authors' code takes one such plain-SGD step beside each global
step, on the same batch.
Its reported accuracy is that of every client's personal model on the client's own test
examples, pooled: Σ_k correct_k / Σ_k tested_k (``personalized_accuracy``); here each
client's test examples are a seeded share of its own (``held_out_positions``).

FedEFC's code (Yu et al. 2025, the source of its Tables 2-3) runs another rule under the
name FedDitto: no personal model; each client trains the received model on
CE + λ||θ - w^t||² (λ = 0.1, no 1/2: gradient 2λ(θ - w^t), ``fedefc_proximal_gradient``),
the server averages as FedAvg and the global model is scored on the test set.
``ditto_tf`` holds the TensorFlow twins of the steps.
"""

import numpy as np

SPLIT_STREAM = 2021  # Separates the held-out draws from the run's other seeded streams.


def proximal_gradient(personal, global_weights, lam: float) -> list:
  """λ(v_k - w^t): the gradient of (λ/2)||v_k - w^t||² (Algorithm 1, the personal step)."""
  if not lam >= 0:
    raise ValueError(f'Ditto needs lambda >= 0, got {lam}')
  return [lam * (np.asarray(v) - np.asarray(w)) for v, w in zip(personal, global_weights)]


def personal_step(personal, loss_gradients, global_weights, lam: float,
                  learning_rate: float) -> list:
  """v_k - η(∇F_k(v_k) + λ(v_k - w^t)) (Algorithm 1, the personal update; plain SGD as
  the authors' code)."""
  return [np.asarray(v) - learning_rate * (np.asarray(g) + p)
          for v, g, p in zip(personal, loss_gradients,
                             proximal_gradient(personal, global_weights, lam))]


def fedefc_proximal_gradient(weights, global_weights, lam: float = 0.1) -> list:
  """2λ(θ - w^t): the gradient of FedEFC's code's λ||θ - w^t||² (its FedDitto)."""
  return proximal_gradient(weights, global_weights, 2.0 * lam)


def _select(num_correct, num_tested, clients):
  correct = np.asarray(num_correct, np.float64)
  tested = np.asarray(num_tested, np.float64)
  if correct.shape != tested.shape or correct.ndim != 1:
    raise ValueError(f'per-client counts of shapes {correct.shape} and {tested.shape}')
  if clients is not None:
    correct, tested = correct[np.asarray(clients)], tested[np.asarray(clients)]
  if not tested.sum() > 0:
    raise ValueError('no test examples among the selected clients')
  return correct, tested


def held_out_positions(num_examples: int, fraction: float, seed: int,
                       client_index: int) -> np.ndarray:
  """The sorted positions of a client's local test examples: round(fraction·n) of its n
  examples, at least one and at most n - 1 (none for n < 2), drawn without replacement by
  ``default_rng([seed, SPLIT_STREAM, client_index])``."""
  if not 0 < fraction < 1:
    raise ValueError(f'the held-out fraction must be in (0, 1), got {fraction}')
  n = int(num_examples)
  if n < 2:
    return np.zeros(0, np.int64)
  count = min(max(int(round(fraction * n)), 1), n - 1)
  rng = np.random.default_rng([int(seed), SPLIT_STREAM, int(client_index)])
  return np.sort(rng.choice(n, size=count, replace=False)).astype(np.int64)


def personalized_accuracy(num_correct, num_tested, clients=None) -> float:
  """Σ_k correct_k / Σ_k tested_k over ``clients`` (all by default: the authors' code's
  test accuracy; its benign accuracy takes the uncorrupted clients), each client's
  personal model on its own test examples."""
  correct, tested = _select(num_correct, num_tested, clients)
  return float(correct.sum() / tested.sum())


def client_mean_accuracy(num_correct, num_tested, clients=None) -> float:
  """(1/K) Σ_k correct_k / tested_k: each selected client's accuracy counts once."""
  correct, tested = _select(num_correct, num_tested, clients)
  if np.any(tested <= 0):
    raise ValueError('a selected client has no test examples')
  return float(np.mean(correct / tested))


def accuracy_variance(num_correct, num_tested, clients=None) -> float:
  """The variance (1/K Σ, NumPy's ``var``) of the clients' accuracies correct_k/tested_k,
  the authors' code's fairness figure (over the uncorrupted clients)."""
  correct, tested = _select(num_correct, num_tested, clients)
  if np.any(tested <= 0):
    raise ValueError('a selected client has no test examples')
  return float(np.var(correct / tested))
