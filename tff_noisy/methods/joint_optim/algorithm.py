"""Joint Optimization (Tanaka et al. 2018) uplifted to FL as FNBench runs it: every client
trains on its own soft labels with L = L_c + α L_p + β L_e and rewrites them from its
output history (``parts``, client state persisted and checkpointed); the server is FedAvg's
(the configured aggregator). Before round T it sets ``active`` = T > T_w
(``ops.joint_optim.label_updates_active``); after every round from T_w + 1 on it reads the
clients' labels from the store and reports them against the truth
(``diagnostics.SoftLabels``).

When labels change. FNBench (and the authors' code) rewrite every label at the end of each
local epoch of an updating round. The client kernel has no end-of-epoch point, so an
example's label is rewritten at the start of its next visit instead, when its row says an
updating epoch has ended since (``due``: its last visit was in an updating round). Every
epoch visits every example once, and an example's history changes only at its own visits,
so the label a visit trains on is the one the epoch-end update gave it: the same numbers.
Between rounds the stored label lags by that one pending update, which the report applies
(``layout.current_labels``).
"""

import numpy as np

from tff_noisy.methods import contract
from tff_noisy.methods.joint_optim import layout
from tff_noisy.methods.joint_optim.diagnostics import SoftLabels
from tff_noisy.methods.joint_optim.parts import ACTIVE, JointOptimLoss, ROWS
from tff_noisy.ops import joint_optim as ops


class LabelUpdatesAndReport(contract.ServerStep):
  """The warm-up switch before each round; the clients' labels after it."""

  def __init__(self, warmup_rounds: int, part: JointOptimLoss):
    self.warmup_rounds = int(warmup_rounds)
    self.part = part

  def before(self, round_num, state, server):
    active = ops.label_updates_active(round_num, self.warmup_rounds)
    state = server.process.set_hparams(state, {ACTIVE: np.float32(active)})
    return state, {'label_updates': active}

  def after(self, round_num, state, server):
    if not ops.label_updates_active(round_num, self.warmup_rounds):
      return state, {}
    program, data, part = server.process.program, server.data, self.part
    labels = {}
    for cid in data.client_ids:
      if not len(data.y[cid]):
        continue
      rows = server.store.objective_state(cid, program, data.y[cid])[ROWS]
      if layout.unpack(rows, part.num_classes, part.queue_size)[2].any():  # It has trained.
        labels[cid] = layout.current_labels(rows, part.num_classes, part.queue_size,
                                            part.hard, part.divide_by_filled)
    return state, {'corrected_labels': SoftLabels(labels)}


def joint_optim(params, setup) -> contract.Recipe:
  part = JointOptimLoss(setup.num_classes, params.alpha, params.beta, params.queue_size,
                        hard=params.labeling == 'hard',
                        divide_by_filled=params.divide_by_filled)
  return contract.Recipe(parts=(part,),
                         server=(LabelUpdatesAndReport(params.warmup(setup.rounds), part),))
