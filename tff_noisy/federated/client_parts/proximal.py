"""FedProx's proximal term (mu/2)||w - w_received||^2 (Li et al. 2020, Eq. 2) as a client
part: its gradient mu (w - w_received) is added to the loss's at every step, before
``fl.weight_decay``'s (``program`` module doc)."""

import dataclasses

from tff_noisy.federated.client_parts.base import ClientPart, Needs, ON_DEVICE
from tff_noisy.ops import losses


@dataclasses.dataclass(frozen=True)
class Proximal(ClientPart):
  """The proximal term of strength ``mu`` > 0."""

  mu: float

  needs = Needs(stackable=True)
  device = ON_DEVICE

  def __post_init__(self):
    if not self.mu > 0:
      raise ValueError(f'the proximal strength mu must be > 0, got {self.mu}')
    object.__setattr__(self, 'mu', float(self.mu))

  def step(self, grads, weights, ctx):
    return [g + p for g, p in zip(grads, losses.proximal_gradients(
        weights, ctx.initial_trainable, self.mu))]
