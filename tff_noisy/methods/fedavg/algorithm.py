"""FedAvg: cross-entropy clients; FedProx: the same with the local proximal term
(mu/2)||w - w_global||^2 (Li et al. 2020, Eq. 2)."""

from tff_noisy.federated.client_parts import CrossEntropy, Proximal
from tff_noisy.methods.recipe import Recipe


def fedavg(params, setup) -> Recipe:
  """The default recipe: nothing to add."""
  del params, setup
  return Recipe()


def fedprox(params, setup) -> Recipe:
  del setup
  return Recipe(parts=(CrossEntropy(), Proximal(params.mu)))
