"""Co-teaching (Han et al. 2018, Algorithm 1) uplifted to FL as MaskedOptim's Table 3
compares it: each client trains the two-network model (``methods.two_networks``) on the
cross-update loss (``parts``); the server aggregates it as any model, so each network is
averaged with the configured aggregator, and evaluates network f. Before every round the
server sets the forget rate τ(T) of its schedule (``ops.coteaching.forget_rate``, T the
round) in the hparams the clients receive.
"""

from tff_noisy.methods.coteaching.parts import CrossUpdateLoss, FORGET_RATE
from tff_noisy.methods.recipe import Recipe, ServerStep
from tff_noisy.methods.two_networks import two_networks
from tff_noisy.ops import coteaching as coteaching_ops


class ForgetRate(ServerStep):
  """Sets τ(T) before round T."""

  def __init__(self, params):
    self.params = params

  def before(self, round_num, state, server):
    params = self.params
    rate = coteaching_ops.forget_rate(round_num, params.forget_rate, params.gradual_rounds,
                                      params.exponent)
    return server.process.set_hparams(state, {FORGET_RATE: rate}), {FORGET_RATE: rate}


def coteaching(params, setup) -> Recipe:
  return Recipe(parts=(CrossUpdateLoss(setup.num_classes),), client_model=two_networks,
                server=(ForgetRate(params),))
