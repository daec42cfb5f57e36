"""Co-teaching+ (Yu et al. 2019, Algorithm 1) uplifted to FL as FNBench runs it: each client
trains the two-network model (``methods.two_networks``) on the cross-update loss
(``parts``); the server aggregates it as any model (each network with the configured
aggregator) and evaluates network f. Before every round T the server sets τ(T) (Co-teaching's
schedule, ``ops.coteaching_plus.forget_rate``) and whether T > init_epoch (the disagreement
step, ``ops.coteaching_plus.disagreement_active``) in the hparams the clients receive.
"""

import numpy as np

from tff_noisy.methods import contract
from tff_noisy.methods.coteaching_plus.parts import (CrossUpdatePlusLoss, DISAGREEMENT,
                                                     FORGET_RATE)
from tff_noisy.methods.two_networks import two_networks
from tff_noisy.ops import coteaching_plus as ops


class Schedule(contract.ServerStep):
  """Sets τ(T) and the disagreement switch before round T."""

  def __init__(self, params, rounds: int):
    self.params = params
    self.gradual_rounds = params.gradual(rounds)

  def before(self, round_num, state, server):
    params = self.params
    rate = ops.forget_rate(round_num, params.forget_rate, self.gradual_rounds, params.exponent)
    disagreement = ops.disagreement_active(round_num, params.init_epoch)
    state = server.process.set_hparams(state, {FORGET_RATE: np.float32(rate),
                                               DISAGREEMENT: np.float32(disagreement)})
    return state, {FORGET_RATE: rate, DISAGREEMENT: disagreement}


def coteaching_plus(params, setup) -> contract.Recipe:
  return contract.Recipe(
      parts=(CrossUpdatePlusLoss(setup.num_classes, params.on_probabilities,
                                 params.none_kept),),
      client_model=two_networks, server=(Schedule(params, setup.rounds),))
