"""MOON (Li, He & Song 2021, Algorithm 1) and MOON under FedDS's aggregation weights
(FedDS Table 4's "MOON + FedDS"): the clients' objective is MOON's (``objective``), the
server FedAvg's (the configured aggregator) or FedDS's."""

import tensorflow as tf

from tff_noisy.federated import client_work
from tff_noisy.methods import base
from tff_noisy.methods.fedds.algorithm import FedDS
from tff_noisy.methods.moon.objective import ModelContrastiveObjective


class Moon(base.Method):

  @classmethod
  def objective(cls, params, setup):
    weights = client_work.model_weights_of(setup.model_fn())
    specs = [tf.TensorSpec(v.shape, v.dtype) for v in tf.nest.flatten(weights)]
    return ModelContrastiveObjective(specs, params.mu, params.temperature)


class FedDSMoon(Moon, FedDS):
  """MOON's clients, FedDS's Dawid-Skene aggregation weights."""
