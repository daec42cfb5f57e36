"""MOON (Li, He & Song 2021, Algorithm 1): the clients' parts are cross-entropy, the
frozen global and previous local models and MOON's contrastive term (``parts``); the
server is FedAvg's (the configured aggregator)."""

import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.methods.moon.parts import ModelContrast


def moon(params, setup) -> contract.Recipe:
  weights = contract.model_weights_of(setup.model_fn())
  specs = [tf.TensorSpec(v.shape, v.dtype) for v in tf.nest.flatten(weights)]
  return contract.Recipe(parts=(contract.CrossEntropy(),
                                contract.GlobalAndPreviousModels(specs),
                                ModelContrast(params.mu, params.temperature)))
