"""Joint Optimization's client part (Tanaka et al. 2018, the alternating steps on θ and Y,
as ``ops.joint_optim_tf``).

The client's state is one float32 table (``layout``: soft label, output history, count,
``due`` per example), the kernel's per-example rows (``Needs.rows``), persisted between
rounds. At every step the loss reads the batch's rows; a due row's label is first rewritten
to the mean of its last q softmax outputs (its epoch-end update, applied at its next visit:
the algorithm's module doc); the step trains on L = L_c + α L_p + β L_e against the labels,
then the step's softmax outputs enter the history and ``due`` takes the hparam ``active``;
``after_step`` writes the batch's new rows, which the kernel scatters back into the table.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.methods.joint_optim import layout
from tff_noisy.ops import joint_optim_tf

ROWS = 'joint_optim_rows'
ACTIVE = 'active'
_NEW_ROWS = 'joint_optim_new_rows'


class JointOptimLoss(contract.ClientPart):
  """ℓ_j = -Σ_c y_jc log s_jc + α·L_p + β·H(s_j) on the batch's (updated) soft labels."""

  needs = contract.Needs(rows=ROWS)  # Not stackable: L_p couples a batch; state.
  hparams = {ACTIVE: np.float32(0.0)}

  def __init__(self, num_classes: int, alpha: float = 1.2, beta: float = 0.8,
               queue_size: int = 15, hard: bool = False, divide_by_filled: bool = False):
    self.num_classes = int(num_classes)
    self.alpha, self.beta = float(alpha), float(beta)
    self.queue_size = int(queue_size)
    self.hard = bool(hard)
    self.divide_by_filled = bool(divide_by_filled)
    self.state_spec = {ROWS: tf.TensorSpec(
        [None, layout.width(self.num_classes, self.queue_size)], tf.float32)}

  def initial_state(self, labels: np.ndarray) -> dict:
    return {ROWS: layout.initial(labels, self.num_classes, self.queue_size)}

  def loss(self, batch, out, ctx):
    rows, c, q = tf.stop_gradient(out.rows), self.num_classes, self.queue_size
    labels = rows[:, :c]
    history = tf.reshape(rows[:, c:c + q * c], [-1, q, c])
    count = tf.cast(rows[:, c + q * c], tf.int32)
    due = rows[:, c + q * c + 1] > 0
    updated = joint_optim_tf.updated_labels(history, count, labels, self.hard,
                                            self.divide_by_filled)
    labels = tf.where(due[:, None], updated, labels)
    loss = joint_optim_tf.joint_loss(labels, out.logits, self.alpha, self.beta)
    history, count = joint_optim_tf.update_history(history, count, tf.nn.softmax(out.logits))
    active = tf.cast(tf.cast(ctx.hparams[ACTIVE], tf.bool), tf.float32)
    ctx[_NEW_ROWS] = tf.concat([labels, tf.reshape(history, [-1, q * c]),
                                tf.cast(count, tf.float32)[:, None],
                                tf.fill(tf.shape(count)[:1], active)[:, None]], axis=1)
    return loss

  def after_step(self, weights, ctx):
    ctx.rows = ctx[_NEW_ROWS]
    return weights
