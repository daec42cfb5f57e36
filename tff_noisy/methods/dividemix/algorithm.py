"""DivideMix (Li et al. 2020, Algorithm 1) uplifted to FL as FNBench runs it: each client
trains the two-network model (``methods.two_networks``) on DivideMix's loss (``parts``);
the server aggregates it as any model (each network with the configured aggregator) and
evaluates network f. Before round T it sets ``dividemix_active`` = T > T_w, the round
number (for λ_u's ramp) and the round's mixing seed; each client's key (its place among
the clients) is a dataset field. After every round past warm-up it reads the clients'
clean probabilities from the store and reports each network's labelled set against the
truth (``diagnostics.CleanSelection``).
"""

import numpy as np

from tff_noisy.methods import contract
from tff_noisy.methods.dividemix.diagnostics import CleanSelection
from tff_noisy.methods.dividemix.parts import ACTIVE, CLEAN_PROBABILITY, DivideMixLoss, ROUND
from tff_noisy.methods.two_networks import two_networks


def active(round_num: int, warmup_rounds: int) -> bool:
  """Whether round T = 1, 2, ... co-divides: T > T_w (FNBench's ``g_epoch <=
  warmup_epochs`` with 0-based rounds warms up T_w + 1 rounds; here T_w counts them)."""
  return round_num > warmup_rounds


class ScheduleAndReport(contract.KeyedClients):
  """The warm-up switch, round and seed before each round; the divisions after it."""

  def __init__(self, warmup_rounds: int, threshold: float, seed: int):
    self.warmup_rounds = int(warmup_rounds)
    self.threshold = float(threshold)
    self.seed = int(seed)

  def before(self, round_num, state, server):
    on = active(round_num, self.warmup_rounds)
    seed = self.round_seed(round_num)
    state = server.process.set_hparams(state, {ACTIVE: np.float32(on),
                                               ROUND: np.float32(round_num),
                                               contract.MIX_SEED: seed})
    return state, {'dividemix_active': on}

  def after(self, round_num, state, server):
    if not active(round_num, self.warmup_rounds):
      return state, {}
    program, data = server.process.program, server.data
    divided = {}
    for cid in data.client_ids:
      if not len(data.y[cid]):
        continue
      w = np.asarray(server.store.objective_state(cid, program, data.y[cid])[CLEAN_PROBABILITY])
      if (w >= 0).all():  # Divided at least once.
        divided[cid] = w
    return state, {'dividemix_selection': CleanSelection(divided, self.threshold)}


def dividemix(params, setup) -> contract.Recipe:
  warmup = params.warmup(setup.rounds)
  step = ScheduleAndReport(warmup, params.threshold, setup.seed)
  return contract.Recipe(
      parts=(DivideMixLoss(setup.num_classes, warmup, params.threshold, params.temperature,
                           params.alpha, params.lambda_u, params.lambda_r),),
      client_model=two_networks,
      data=contract.DataPlan(fields={contract.MIX_KEY: (np.int32, ())}, extras=step.extras),
      server=(step,))
