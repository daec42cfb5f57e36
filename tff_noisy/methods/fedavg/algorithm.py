"""FedAvg: cross-entropy clients; FedProx: the same with the local proximal term
(mu/2)||w - w_global||^2 (Li et al. 2020, Eq. 2)."""

from tff_noisy.federated.client_parts import CrossEntropy, Proximal
from tff_noisy.methods import base


class FedAvg(base.Method):
  """The default ``Method``: nothing to add."""


class FedProx(base.Method):

  @classmethod
  def client_parts(cls, params, setup):
    del setup
    return [CrossEntropy(), Proximal(params.mu)]
