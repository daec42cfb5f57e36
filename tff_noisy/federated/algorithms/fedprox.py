"""FedProx (Li et al. 2020): FedAvg with the local proximal term (mu/2)||w - w_global||^2."""

from tff_noisy.federated.algorithms import base
from tff_noisy.federated.objectives.base import ClientObjective


class FedProx(base.Method):

  @classmethod
  def objective(cls, params, setup):
    del setup
    return ClientObjective(proximal_strength=params.mu)
