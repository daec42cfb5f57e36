"""A client's optimiser step and upload rule: the TensorFlow every client runtime runs.

TensorFlow only (no TFF), so the TFLite training export (``tflite_export.training``)
compiles these very functions into its ``train`` and ``upload`` signatures, while the
client kernel (``client_work.build_local_training``, which the ``tff`` and ``tf`` runtimes
run) loops ``train_step`` over a client's batches. The stacked runtime
(``runtime.stacked``) steps many clients' weight tensors at once through the same
``optimizer_step``.
"""

from typing import Callable, Optional

import tensorflow as tf

from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import losses


def regularized_gradients(grads, trainable, initial_trainable, proximal_strength: float,
                          weight_decay: float) -> list:
  """The loss gradients plus FedProx's proximal gradient (``losses.proximal_gradients``,
  Li et al. 2020 Eq. 2) and coupled L2 ``weight_decay * w``, each only when non-zero."""
  grads = list(grads)
  if proximal_strength:
    grads = [g + p for g, p in zip(grads, losses.proximal_gradients(
        trainable, initial_trainable, proximal_strength))]
  if weight_decay:
    grads = [g + weight_decay * w for g, w in zip(grads, trainable)]
  return grads


def optimizer_step(optimizer, opt_state, trainable, grads, initial_trainable,
                   objective: ClientObjective, context, hparams, weight_decay: float) -> tuple:
  """``(opt_state, new trainable values)`` of one client step from the loss gradients
  ``grads``: FedProx's proximal term and coupled weight decay (``regularized_gradients``)
  and the objective's ``weight_gradients`` are added, ``optimizer.next`` (a
  ``tff.learning.optimizers`` optimiser, functional on ``opt_state``) steps, and the new
  weights take the objective's ``step_shift``. Assigns nothing: ``trainable`` may be
  variables or (stacked) tensors."""
  grads = regularized_gradients(grads, trainable, initial_trainable,
                                objective.proximal_strength, weight_decay)
  extra = objective.weight_gradients(trainable, initial_trainable, context, hparams)
  if extra is not None:
    grads = [g + e for g, e in zip(grads, extra)]
  opt_state, new_trainable = optimizer.next(opt_state, tuple(trainable), tuple(grads))
  shift = objective.step_shift(context, hparams)
  if shift is not None:
    new_trainable = [w + s for w, s in zip(new_trainable, shift)]
  return opt_state, new_trainable


def train_step(model: tf.keras.Model, forward: Callable, objective: ClientObjective,
               optimizer, opt_state, batch, context, hparams, initial_trainable,
               weight_decay: float, rows: Optional[tf.Tensor] = None) -> tuple:
  """One optimiser step of a client on ``batch``; assigns the model's trainable variables.

  The loss is the objective's mean per-example loss plus the model's regularisation
  losses; ``optimizer_step`` turns its gradient into the new weights.
  ``forward(x) -> (features or None, logits)``
  is the model in training mode. ``rows``: the batch's rows of the objective's trainable
  per-example state, whose gradient is returned (else None).

  Returns ``(opt_state, loss, per-example loss [B], logits [B, C], row gradients or
  None)``.
  """
  trainable = model.trainable_variables
  with tf.GradientTape() as tape:
    if rows is not None:
      tape.watch(rows)
    features, logits = forward(batch['x'])
    per_example = objective.loss(batch, logits, features, context, hparams, rows)
    loss = tf.reduce_mean(per_example)
    if model.losses:
      loss += tf.add_n(model.losses)
  if rows is not None:
    grads, row_grads = tape.gradient(loss, (trainable, rows))
  else:
    grads, row_grads = tape.gradient(loss, trainable), None
  opt_state, new_trainable = optimizer_step(optimizer, opt_state, trainable, grads,
                                            initial_trainable, objective, context, hparams,
                                            weight_decay)
  for variable, value in zip(trainable, new_trainable):
    variable.assign(value)
  return opt_state, loss, per_example, logits, row_grads


def zero_if_any_non_finite(structure) -> tuple:
  """``(structure, False)``, or ``(zeros, True)`` when any value is non-finite: a client
  whose update is not finite sends zeros (and weight 0, its caller's part)."""
  flat = tf.nest.flatten(structure)
  all_finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(t)) for t in flat])
  zeros = tf.nest.map_structure(tf.zeros_like, structure)
  cleaned = tf.cond(all_finite, lambda: structure, lambda: zeros)
  return cleaned, tf.logical_not(all_finite)
