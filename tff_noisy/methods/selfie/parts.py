"""SELFIE's client part (Song et al. 2019, Algorithm 1, as ``ops.selfie_tf``).

The client's state is one float32 table (``layout``: history, count, refurbished label per
example), the kernel's per-example rows (``Needs.rows``), persisted between rounds. At every
step the loss reads the batch's rows, writes this step's predictions into the history, and
after warm-up (hparam ``active``) refurbishes the examples whose history is certain (F <= ε)
and takes the mean cross-entropy over the clean ∪ refurbished examples; ``after_step`` writes
the batch's new rows, which the kernel scatters back into the table.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.methods.selfie import layout
from tff_noisy.ops import selfie_tf

ROWS = 'selfie_rows'
ACTIVE = 'active'
_NEW_ROWS = 'selfie_new_rows'


class SelfieLoss(contract.ClientPart):
  """ℓ_j = (B/k)·m_j·CE(z_j, ỹ_j) after warm-up, CE(z_j, y_j) in it; the history always."""

  needs = contract.Needs(rows=ROWS)  # Not stackable: selection within a batch, state.
  hparams = {ACTIVE: np.float32(0.0)}

  def __init__(self, num_classes: int, queue_size: int = 15, threshold: float = 0.05,
               noise_rate: float = 0.2, count_empty_slots: bool = True):
    if num_classes < 2:
      raise ValueError(f'SELFIE needs at least 2 classes, got {num_classes}')
    self.num_classes = int(num_classes)
    self.queue_size = int(queue_size)
    self.threshold = float(threshold)
    self.noise_rate = float(noise_rate)
    self.count_empty_slots = bool(count_empty_slots)
    self.state_spec = {ROWS: tf.TensorSpec([None, layout.width(self.queue_size)], tf.float32)}

  def initial_state(self, labels: np.ndarray) -> dict:
    return {ROWS: layout.initial(len(labels), self.queue_size)}

  def loss(self, batch, out, ctx):
    rows, q = tf.stop_gradient(out.rows), self.queue_size
    history = tf.cast(rows[:, :q], tf.int32)
    count, refurbished = tf.cast(rows[:, q], tf.int32), tf.cast(rows[:, q + 1], tf.int32)
    loss, history, count, refurbished = selfie_tf.client_step(
        batch['y'], out.logits, history, count, refurbished, self.num_classes,
        self.threshold, self.noise_rate, ctx.hparams[ACTIVE], self.count_empty_slots)
    ctx[_NEW_ROWS] = tf.concat([tf.cast(history, tf.float32),
                                tf.cast(count, tf.float32)[:, None],
                                tf.cast(refurbished, tf.float32)[:, None]], axis=1)
    return loss

  def after_step(self, weights, ctx):
    ctx.rows = ctx[_NEW_ROWS]
    return weights
