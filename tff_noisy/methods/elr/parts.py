"""ELR's client part (Liu et al. 2020, Eqs. 7 and 9, as ``ops.elr_tf``).

The client's state is one float32 table of targets t [n, C] (0 before an example's first
visit), the kernel's per-example rows (``Needs.rows``), persisted between rounds. At every
step the loss reads the batch's rows, moves them towards the step's clamped, renormalised
softmax (β·t + (1 − β)·p̂, the authors' order: before the loss) and adds λ·log(1 − ⟨t,
clamp(p)⟩) to the cross-entropy part's term; ``after_step`` writes the batch's updated
targets, which the kernel scatters back into the table.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.ops import elr as ops
from tff_noisy.ops import elr_tf

ROWS = 'elr_targets'
_NEW_ROWS = 'elr_new_targets'


class ELRTerm(contract.ClientPart):
  """ℓ_i = λ·log(1 − ⟨t_i, clamp(p_i)⟩) on the batch's updated targets (beside
  ``CrossEntropy``)."""

  needs = contract.Needs(rows=ROWS)  # Not stackable: per-example state.

  def __init__(self, num_classes: int, beta: float = 0.7, lambda_elr: float = 3.0):
    self.num_classes = int(num_classes)
    self.beta, self.lambda_elr = float(beta), float(lambda_elr)
    self.state_spec = {ROWS: tf.TensorSpec([None, self.num_classes], tf.float32)}

  def initial_state(self, labels: np.ndarray) -> dict:
    return {ROWS: ops.initial_targets(len(labels), self.num_classes)}

  def loss(self, batch, out, ctx):
    del batch
    targets = elr_tf.updated_targets(tf.stop_gradient(out.rows), out.logits, self.beta)
    ctx[_NEW_ROWS] = targets
    return elr_tf.elr_term(targets, out.logits, self.lambda_elr)

  def after_step(self, weights, ctx):
    ctx.rows = ctx[_NEW_ROWS]
    return weights
