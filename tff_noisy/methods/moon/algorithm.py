"""MOON (Li, He & Song 2021, Algorithm 1) and MOON under FedDS's aggregation weights
(FedDS Table 4's "MOON + FedDS"): the clients' parts are cross-entropy, the frozen global
and previous local models and MOON's contrastive term (``parts``), the server FedAvg's
(the configured aggregator) or FedDS's."""

import tensorflow as tf

from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import CrossEntropy, GlobalAndPreviousModels
from tff_noisy.methods import base
from tff_noisy.methods.fedds.algorithm import FedDS
from tff_noisy.methods.moon.parts import ModelContrast


class Moon(base.Method):

  @classmethod
  def client_parts(cls, params, setup):
    weights = client_work.model_weights_of(setup.model_fn())
    specs = [tf.TensorSpec(v.shape, v.dtype) for v in tf.nest.flatten(weights)]
    return [CrossEntropy(), GlobalAndPreviousModels(specs),
            ModelContrast(params.mu, params.temperature)]


class FedDSMoon(Moon, FedDS):
  """MOON's clients, FedDS's Dawid-Skene aggregation weights."""
