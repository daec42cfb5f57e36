"""FedEFC's code's FedDitto (``util/local_training.py``, ``LocalUpdateDitto``): each
client minimises CE + λ||θ - w^t||² at every step, w^t the received model (fixed in the
round), whose gradient 2λ(θ - w^t) (``ops.ditto.fedefc_proximal_gradient``) is FedProx's
term of strength μ = 2λ (the shared part ``Proximal``); the server is FedAvg's (the
configured aggregator, weighted by the clients' examples) and the global model is the
one scored."""

from tff_noisy.methods import contract


def ditto(params, setup) -> contract.Recipe:
  del setup
  return contract.Recipe(parts=(contract.CrossEntropy(), contract.Proximal(2.0 * params.lam)))
