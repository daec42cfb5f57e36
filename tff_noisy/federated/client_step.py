"""A client's optimiser step and upload rule: the TensorFlow every client runtime runs.

TensorFlow only (no TFF), so the TFLite training export (``tflite_export.training``)
compiles these very functions into its ``train`` and ``upload`` signatures, while the
client kernel (``client_work.build_local_training``, which the ``tff`` and ``tf`` runtimes
run) loops ``train_step`` over a client's batches and the stacked runtime
(``runtime.stacked``) runs ``train_step`` on many clients' weight tensors at once. This is
the one place a client's gradient is taken.
"""

from typing import Callable, Optional

import tensorflow as tf

from tff_noisy.federated.client_parts import ClientContext, ClientProgram, Outputs


def model_losses(model: tf.keras.Model) -> Callable:
  """``train_step``'s ``regularization`` of a Keras model: its own losses (weight and
  activity regularisers), summed, or None when it has none."""
  return lambda: tf.add_n(model.losses) if model.losses else None


def optimizer_step(optimizer, opt_state, trainable, grads, program: ClientProgram,
                   ctx: ClientContext, weight_decay: float) -> tuple:
  """``(opt_state, new trainable values)`` of one client step from the loss gradients
  ``grads``: the parts' terms and coupled weight decay are added (``ClientProgram.step``),
  ``optimizer.next`` (a ``tff.learning.optimizers`` optimiser, functional on
  ``opt_state``) steps, and the parts' ``after_step`` shift the new weights. Assigns
  nothing: ``trainable`` may be variables or (stacked) tensors."""
  grads = program.step(grads, trainable, ctx, weight_decay)
  opt_state, new_trainable = optimizer.next(opt_state, tuple(trainable), tuple(grads))
  return opt_state, program.after_step(list(new_trainable), ctx)


def train_step(forward: Callable, trainable, program: ClientProgram, optimizer, opt_state,
               batch, ctx: ClientContext, weight_decay: float, *,
               rows: Optional[tf.Tensor] = None, mean: Callable = tf.reduce_mean,
               regularization: Optional[Callable] = None) -> tuple:
  """One optimiser step of a client on ``batch``; assigns nothing.

  ``forward(x) -> (features or None, logits)`` is the model in training mode on the
  ``trainable`` weights (variables, or tensors it reads in their place). The loss is
  ``mean`` of the parts' per-example loss (the stacked runtime's: over the batch's real
  examples) plus ``regularization()`` (the model's own losses; None: none);
  ``optimizer_step``
  turns its gradient into the new weights. ``rows``: the batch's rows of the parts'
  per-example state (``Needs.rows``), whose gradient the parts' ``after_step`` reads as
  ``ctx.row_grads`` and whose new values it leaves in ``ctx.rows``.

  Returns ``(opt_state, new trainable values, loss, per-example loss [B], logits [B, C])``.
  """
  with tf.GradientTape() as tape:
    tape.watch(trainable)
    if rows is not None:
      tape.watch(rows)
    features, logits = forward(batch['x'])
    per_example = program.loss(batch, Outputs(logits, features, rows), ctx)
    loss = mean(per_example)
    extra = regularization() if regularization is not None else None
    if extra is not None:
      loss += extra
  if rows is not None:
    grads, row_grads = tape.gradient(loss, (trainable, rows))
  else:
    grads, row_grads = tape.gradient(loss, trainable), None
  ctx.rows, ctx.row_grads = rows, row_grads
  opt_state, new_trainable = optimizer_step(optimizer, opt_state, trainable, grads, program,
                                            ctx, weight_decay)
  return opt_state, new_trainable, loss, per_example, logits


def zero_if_any_non_finite(structure) -> tuple:
  """``(structure, False)``, or ``(zeros, True)`` when any value is non-finite: a client
  whose update is not finite sends zeros (and weight 0, its caller's part)."""
  flat = tf.nest.flatten(structure)
  all_finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(t)) for t in flat])
  zeros = tf.nest.map_structure(tf.zeros_like, structure)
  cleaned = tf.cond(all_finite, lambda: structure, lambda: zeros)
  return cleaned, tf.logical_not(all_finite)
