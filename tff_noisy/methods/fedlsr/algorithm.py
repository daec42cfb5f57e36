"""FedLSR (Jiang et al., CIKM 2022; FNBench's ``LocalUpdateFedLSR``), on ``ops.fedlsr``.

The clients train on FedLSR's loss over two views of each batch (``parts``); the server
aggregates with the configured aggregator (FedAvg in the code) and, before round r, sets
γ(r) = γ (r − 1) / t_w for r − 1 < t_w, else γ (``fedlsr.distillation_weight``, t_w =
``warmup_ratio`` · fl.rounds unrounded) and the round's seed of the views and the mixing
weights. Each client's key (its place among the clients) is a dataset field.

Reports: every round ``lsr_distill_weight`` (γ(r)).
"""

import numpy as np

from tff_noisy.errors import ConfigError
from tff_noisy.methods.contract import DataPlan, KeyedClients, MIX_KEY, Recipe
from tff_noisy.methods.fedlsr import parts as fedlsr_parts
from tff_noisy.ops import fedlsr as fedlsr_ops


class DistillationRamp(KeyedClients):
  """γ(r) and the round's seed before round r; each client's key as its data field."""

  def __init__(self, params, rounds: int, seed: int):
    self.params = params
    self.warmup = fedlsr_ops.warmup_rounds(rounds, params.warmup_ratio)
    self.seed = int(seed)

  def before(self, round_num, state, server):
    weight = fedlsr_ops.distillation_weight(round_num, self.params.gamma, self.warmup)
    seed = self.round_seed(round_num)
    state = server.process.set_hparams(state, {fedlsr_parts.DISTILL_WEIGHT: weight,
                                               fedlsr_parts.SEED: seed})
    return state, {fedlsr_parts.DISTILL_WEIGHT: weight}


def image_fields(data) -> dict:
  """The client's key field, for data of images [H, W, channels] only (the second view
  is an image augmentation): a ConfigError before any work for other inputs."""
  shape = tuple(data.input_shape)
  if len(shape) != 3:
    raise ConfigError(f"method.name: fedlsr's second view needs image inputs [height, "
                      f'width, channels]; the data\'s inputs have shape {shape}')
  return {MIX_KEY: (np.int32, ())}


def fedlsr(params, setup) -> Recipe:
  """Two views per batch with FedLSR's self-regularisation; γ(t) ramped by the server."""
  ramp = DistillationRamp(params, setup.rounds, setup.seed)
  return Recipe(parts=(fedlsr_parts.SelfRegularisation(
      params.gamma_e, variant=params.variant, inverse_temperature=params.distill_t),),
                data=DataPlan(fields=image_fields, extras=ramp.extras),
                server=(ramp,))
