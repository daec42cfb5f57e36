"""SELFIE (Song et al. 2019, Algorithm 1) uplifted to FL as FNBench runs it: every client
trains on the SELFIE loss with its own prediction histories and refurbished labels
(``parts``, client state persisted and checkpointed); the server is FedAvg's (the configured
aggregator). Before round T it sets ``active`` = T > T_w (``ops.selfie.refurbishing_active``);
after every round from T_w + 1 on it reads the clients' refurbished labels from the store
and reports them against the truth (``diagnostics.Refurbishment``).
"""

import numpy as np

from tff_noisy.methods import contract
from tff_noisy.methods.selfie import layout
from tff_noisy.methods.selfie.diagnostics import Refurbishment
from tff_noisy.methods.selfie.parts import ACTIVE, ROWS, SelfieLoss
from tff_noisy.ops import selfie as ops


class RefurbishAndReport(contract.ServerStep):
  """The warm-up switch before each round; the refurbished labels after it."""

  def __init__(self, warmup_rounds: int, queue_size: int):
    self.warmup_rounds = int(warmup_rounds)
    self.queue_size = int(queue_size)

  def before(self, round_num, state, server):
    active = ops.refurbishing_active(round_num, self.warmup_rounds)
    state = server.process.set_hparams(state, {ACTIVE: np.float32(active)})
    return state, {'refurbishing': active}

  def after(self, round_num, state, server):
    if not ops.refurbishing_active(round_num, self.warmup_rounds):
      return state, {}
    program, data = server.process.program, server.data
    refurbished = {}
    for cid in data.client_ids:
      if not len(data.y[cid]):
        continue
      rows = server.store.objective_state(cid, program, data.y[cid])[ROWS]
      _, count, labels = layout.unpack(rows, self.queue_size)
      if count.any():  # The client has trained.
        refurbished[cid] = labels
    return state, {'refurbishment': Refurbishment(refurbished)}


def selfie(params, setup) -> contract.Recipe:
  return contract.Recipe(
      parts=(SelfieLoss(setup.num_classes, params.queue_size, params.threshold,
                        params.noise_rate, params.count_empty_slots),),
      server=(RefurbishAndReport(params.warmup(setup.rounds), params.queue_size),))
