"""Co-teaching (Han et al. 2018, Algorithm 1) uplifted to FL as MaskedOptim's Table 3
compares it: each client trains the two-network model (``networks``) on the cross-update
loss (``parts``); the server aggregates it as any model, so each network is averaged
with the configured aggregator, and evaluates network f. Before every round the server
sets the forget rate τ(T) of its schedule (``ops.coteaching.forget_rate``, T the round)
in the hparams the clients receive.
"""

from tff_noisy.methods import base
from tff_noisy.methods.coteaching.networks import two_networks
from tff_noisy.methods.coteaching.parts import CrossUpdateLoss, FORGET_RATE
from tff_noisy.ops import coteaching


class CoTeaching(base.Method):

  @classmethod
  def client_model(cls, params, model_fn):
    del params
    return two_networks(model_fn)

  @classmethod
  def client_parts(cls, params, setup):
    del params
    return [CrossUpdateLoss(setup.num_classes)]

  def before_round(self, round_num, state, datasets_fn, store):
    del datasets_fn, store
    rate = coteaching.forget_rate(round_num, self.params.forget_rate,
                                  self.params.gradual_rounds, self.params.exponent)
    return self.process.set_hparams(state, {FORGET_RATE: rate}), {FORGET_RATE: rate}
