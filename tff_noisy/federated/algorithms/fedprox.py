"""FedProx (Li et al. 2020): FedAvg with the local proximal term (mu/2)||w - w_global||^2."""

from tff_noisy.federated.algorithms import base
from tff_noisy.federated.algorithms import fedavg


def build_fedprox_process(model_fn, element_spec, client_optimizer, server_optimizer=None,
                          *, mu: float, **kwargs):
  """Builds a FedProx ``LearningProcess``; ``mu`` > 0 is the proximal strength."""
  if mu <= 0:
    raise ValueError(f'method.params.mu: FedProx needs mu > 0, got {mu}')
  return fedavg.build_fedavg_process(model_fn, element_spec, client_optimizer,
                                     server_optimizer, proximal_strength=mu, **kwargs)


class FedProx(base.Method):

  @classmethod
  def build(cls, params, model_fn, element_spec, client_optimizer, server_optimizer, *,
            local_epochs, seed, rounds):
    del seed, rounds
    return cls(build_fedprox_process(model_fn, element_spec, client_optimizer,
                                     server_optimizer, local_epochs=local_epochs,
                                     mu=params['mu']))
