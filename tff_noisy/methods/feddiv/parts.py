"""FedDiv's client part (Li et al., AAAI 2024; released code lijichang/FLNL-FedDiv,
``main.py``'s ``local_model_training``).

Beside the loss (``CrossEntropy`` on the examples and labels the server selected for the
round), a client's state ``trains``: 1, or 0 when the server found too few examples to
train on (the code's ``len(revised_sample_idx) <= local_bs``), where the client sends the
received model back (its update is scaled by 0) and still counts with its n_k in the
aggregation, as the code appends the global weights.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract

TRAINS = 'trains'


class SendsReceivedWhenIdle(contract.ClientPart):
  """Scales the update by the client's ``trains`` (1 or 0) at ``finish``."""

  state_spec = {TRAINS: tf.TensorSpec([], tf.float32)}

  def initial_state(self, labels):
    del labels
    return {TRAINS: np.float32(1.0)}

  def finish(self, ctx):
    ctx.update_scale = ctx.update_scale * ctx.state[TRAINS]
