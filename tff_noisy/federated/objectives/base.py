"""``ClientObjective``: a method's client side, run by the one generic client work.

Inside a client's computation the client work (``client_work.build_local_training``)
calls, in order (ARCHITECTURE §3):

1. ``prologue(predict, dataset, state, hparams) -> context`` on the just-received global
   model, before any training (FedEFC's transition matrix, MaskedOptim's class prior).
   The context never leaves the client. An objective whose context depends on nothing
   but the received model's inference-mode logits of the client's examples and their
   labels defines ``prologue_of_logits(logits, labels, hparams)`` instead: the default
   prologue then makes that one pass (``inference_pass``; none in the rounds where
   ``received_logits_needed`` is false), and the ``tf`` runtime can stack its clients
   (it runs the received model on every client's examples at once). An objective that
   names ``reference_models``
   (MOON's global and previous models) has frozen copies of the model, their weights set
   by ``reference_weights(received, state, hparams)`` before the prologue; its context
   also holds, under each name, ``x -> (features, logits)`` of that copy in inference
   mode.
2. For every batch, ``loss(batch, logits, features, context, hparams, rows) -> [B]``: the
   per-example loss. ``features`` are the model's penultimate features when
   ``uses_features`` is set (else None); ``rows`` are the batch's rows of the trainable
   per-example state (``trainable_state``), else None. The mean loss, the model's own
   regularisation ``losses``, FedProx's proximal term, the objective's own
   ``weight_gradients`` (a term on the weights alone: FedCorr's adaptive proximal term)
   and ``fl.weight_decay`` drive the model's optimiser step; the rows take
   ``update_rows`` with their own gradient. ``step_shift(context, hparams)`` (None by
   default) adds one tensor per trainable variable to the weights after every optimiser
   step (SCAFFOLD's -lr (c - c_i)).
3. ``trained_state(state, context, initial, trained, steps, hparams) -> state`` after the
   local steps, from the received (``initial``) and trained weights and the number of
   optimiser steps (SCAFFOLD's control variate c_i+).
4. ``epilogue(predict, dataset, context, state, hparams) -> (new state, update scale)``
   after training: merge state (MaskedOptim's label logits with the local model's
   predictions) and scale the update (its pre-merge with the global model).
5. ``client_outputs(old state, new state, hparams) -> {name: tensor}``: what the client
   sends the server beside its update (SCAFFOLD's Δc_i); the process sums them over the
   clients whose update was finite, into the round's training metrics under
   ``outputs``, and the method's ``server_update`` reads the sums (never results.json).

``state_spec`` declares the per-client state the objective keeps across rounds
(checkpointed; a ``None`` leading dimension is one row per example, indexed by the
dataset's ``index`` field); ``initial_state`` gives a client's state before it has any.
``hparams`` are server-decided values broadcast to every client each round (a phase,
a warm-up flag), held in the process state so that a checkpoint keeps them.
``metric_names`` name per-client scalars that ``client_metrics`` reads off the context
(FedEFC's accuracy of the received model on the client's own labels); each round reports
their unweighted mean over the clients whose update was finite.

On a device (``tflite_export.training``), an objective whose ``device_unsupported_reason``
is empty trains with the same ``loss``; one with a prologue declares the context a device
keeps (``device_context``, initial values) and computes it over the client's whole local
set with ``device_prologue``; ``device_metrics`` reads its reported metrics off the
prologue's outputs on the host.

The default objective is cross-entropy (FedAvg), with a proximal strength for FedProx.
"""

from typing import Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from tff_noisy.ops import losses


def inference_pass(predict, dataset):
  """The logits ``predict(x)`` [N, num classes] and labels [N] of every example of
  ``dataset``, in one pass in its order, batch by batch."""

  def collect(arrays, batch):
    logits, labels = arrays
    return (logits.write(logits.size(), predict(batch['x'])),
            labels.write(labels.size(), tf.cast(batch['y'], tf.int64)))

  empty = (tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False),
           tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False))
  logits, labels = dataset.reduce(empty, collect)
  return logits.concat(), tf.reshape(labels.concat(), [-1])


class ClientObjective:
  """Cross-entropy with an optional FedProx proximal term: FedAvg's and FedProx's clients."""

  uses_features: bool = False
  # Names of frozen copies of the model the client work keeps (``reference_weights``).
  reference_models: Tuple[str, ...] = ()
  state_spec: Mapping[str, tf.TensorSpec] = {}
  trainable_state: Optional[str] = None
  hparams: Mapping[str, np.ndarray] = {}
  metric_names: Tuple[str, ...] = ()
  # The loss of an example depends on that example alone (not on the rest of its batch),
  # so clients can be stacked with padded batches (``runtime.stacked``). Read through
  # ``loss_is_per_example``: a class that defines its own ``loss`` must declare it again,
  # else its loss counts as coupling the batch (the safe default).
  per_example_loss: bool = True
  # On a device: the context its prologue sets and its loss reads, {name: initial value}
  # (reset when a round's weights are restored); empty: no device prologue.
  device_context: Mapping[str, np.ndarray] = {}

  def __init__(self, proximal_strength: float = 0.0):
    if proximal_strength < 0:
      raise ValueError(f'proximal_strength must be >= 0, got {proximal_strength}')
    self.proximal_strength = float(proximal_strength)

  def loss_is_per_example(self) -> bool:
    """``per_example_loss`` as declared by the class that defines ``loss`` or by one of
    its subclasses; False where a class overrides ``loss`` without declaring it."""
    for cls in type(self).__mro__:
      if 'per_example_loss' in vars(cls):
        return bool(vars(cls)['per_example_loss'])
      if 'loss' in vars(cls):
        return False
    return False

  def initial_state(self, labels: np.ndarray) -> dict:
    """A client's state before its first round, from its (observed) labels."""
    del labels
    return {}

  def reference_weights(self, received, state, hparams) -> dict:
    """``{name: ModelWeights}`` of every frozen copy in ``reference_models`` this round,
    from the ``received`` weights and the client's state."""
    raise NotImplementedError(
        f'{type(self).__name__} declares reference_models={self.reference_models!r} but '
        'no reference_weights')

  def prologue(self, predict, dataset, state, hparams) -> dict:
    """Context for the losses, computed with the received model (``predict(x)`` logits):
    ``prologue_of_logits`` of one ``inference_pass`` when the objective defines it, else
    none."""
    del state
    if not self.reads_received_logits():
      return {}
    needed = self.received_logits_needed(hparams)
    if needed is True:
      logits, labels = inference_pass(predict, dataset)
    else:  # No pass (and no shuffle of the dataset drawn) in rounds that read nothing.
      logits, labels = tf.cond(needed, lambda: inference_pass(predict, dataset),
                               lambda: (tf.zeros([0, 0]), tf.zeros([0], tf.int64)))
    return self.prologue_of_logits(logits, labels, hparams)

  def prologue_of_logits(self, logits, labels, hparams) -> dict:
    """The context from the received model's inference-mode ``logits`` [N, num classes]
    of the client's examples and their ``labels`` [N] (module doc)."""
    raise NotImplementedError(f'{type(self).__name__} has no prologue_of_logits')

  def received_logits_needed(self, hparams):
    """Whether this round's ``prologue_of_logits`` reads the logits: True, or a bool
    tensor of the hparams (False: it gets none, ``[0, 0]``, and no pass is made)."""
    del hparams
    return True

  def reads_received_logits(self) -> bool:
    """Whether the context is ``prologue_of_logits`` of the received model's logits."""
    return type(self).prologue_of_logits is not ClientObjective.prologue_of_logits

  def mix_batch(self, batch, step, hparams):
    """The batch a step trains on, from the one the client's data gives and the step's
    number (0, 1, ... over the client's local epochs); default the batch itself. What
    it adds, ``loss`` reads (FedCorr's mixup)."""
    del step, hparams
    return batch

  def loss(self, batch, logits, features, context, hparams, rows):
    """Per-example loss [B]; cross-entropy on the batch's labels."""
    del features, context, hparams, rows
    return losses.cross_entropy(batch['y'], logits)

  def weight_gradients(self, trainable, initial_trainable, context, hparams):
    """Gradients [per trainable variable] of a term on the weights alone, added to the
    loss's at every step (``trainable``: the current weights, ``initial_trainable``: the
    received ones); None (the default): no such term."""
    del trainable, initial_trainable, context, hparams
    return None

  def client_metrics(self, context, hparams) -> dict:
    """``{name: float32 scalar}`` for every name in ``metric_names``, from the context."""
    del hparams
    return {name: context[name] for name in self.metric_names}

  def update_rows(self, rows, gradients, hparams):
    """New values of the batch's trainable-state rows after a step."""
    raise NotImplementedError(
        f'{type(self).__name__} declares trainable_state={self.trainable_state!r} but no '
        'update_rows')

  def step_shift(self, context, hparams):
    """A tensor per trainable variable added to the weights after every optimiser step
    (outside the optimiser: no momentum acts on it), or None."""
    del context, hparams
    return None

  def trained_state(self, state, context, initial, trained, steps, hparams):
    """The state after the local steps, from the received and trained
    ``ModelWeights`` and the number of optimiser ``steps``; default: unchanged."""
    del context, initial, trained, steps, hparams
    return state

  def epilogue(self, predict, dataset, context, state, hparams):
    """``(new state, update scale)`` after local training; default: unchanged, 1."""
    del predict, dataset, context, hparams
    return state, tf.constant(1.0)

  def client_outputs(self, old_state, new_state, hparams) -> dict:
    """``{name: float32 tensor}`` the client sends beside its update (summed over the
    clients at the server); default: none."""
    del old_state, new_state, hparams
    return {}

  def device_unsupported_reason(self) -> str:
    """Why this objective's clients cannot train on a device ('' when they can)."""
    if self.trainable_state:
      return (f'it trains per-example client state {self.trainable_state!r} (per-sample '
              'label logits updated by update_rows) beside the model')
    if self.reference_models:
      return f'it runs frozen copies of the model ({", ".join(self.reference_models)})'
    if self.uses_features:
      return ("its loss reads the model's penultimate features and per-example dataset "
              "fields (LSC's K-similarity embeddings)")
    own = lambda method: getattr(type(self), method) is not getattr(ClientObjective, method)  # pylint: disable=unnecessary-lambda-assignment
    if own('epilogue') or own('weight_gradients') or (own('prologue')
                                                       and not own('device_prologue')):
      return 'no on-device prologue/epilogue for it'
    if own('step_shift') or own('trained_state') or own('client_outputs'):
      return 'no on-device form of its step shift, trained state or client outputs'
    if own('mix_batch'):
      return 'no on-device form of its batch mixing'
    return ''

  def device_prologue(self, predict, x, y, hparams) -> dict:
    """The prologue on a device over the client's whole local set (``x`` [N, ...], ``y``
    [N]) with the received model (``predict(x)`` logits): every ``device_context`` entry
    plus what ``device_metrics`` reads."""
    raise NotImplementedError(f'{type(self).__name__} has no device prologue')

  def device_metrics(self, outputs: Mapping[str, np.ndarray]) -> dict:
    """``{name: float}`` for each of ``metric_names``, from the device prologue's
    ``outputs`` (host side)."""
    return {name: float(outputs[name]) for name in self.metric_names}

  def describe(self) -> dict:
    """What an exported model's sidecar records of the objective."""
    return {'name': type(self).__name__, 'proximal_strength': self.proximal_strength}
