"""TensorFlow twins of ``ditto``'s steps, run inside the clients' training."""


def proximal_gradient(personal, global_weights, lam: float) -> list:
  """``ditto.proximal_gradient``: λ(v_k - w^t), added to the personal loss's gradients."""
  return [lam * (v - w) for v, w in zip(personal, global_weights)]


def personal_step(personal, loss_gradients, global_weights, lam: float,
                  learning_rate: float) -> list:
  """``ditto.personal_step``: v_k - η(∇F_k(v_k) + λ(v_k - w^t))."""
  return [v - learning_rate * (g + p) for v, g, p in zip(
      personal, loss_gradients, proximal_gradient(personal, global_weights, lam))]


def fedefc_proximal_gradient(weights, global_weights, lam: float = 0.1) -> list:
  """``ditto.fedefc_proximal_gradient``: 2λ(θ - w^t)."""
  return proximal_gradient(weights, global_weights, 2.0 * lam)
