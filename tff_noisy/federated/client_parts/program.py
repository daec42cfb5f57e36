"""``ClientProgram``: a method's client parts as the one client kernel runs them.

The kernel (``client_work.build_local_training``), the stacked ``tf`` runtime
(``runtime.stacked``) and the TFLite training export call a program's points, which run
every part's, in the parts' order (``base`` module doc). What the kernel must provide
and whether the clients may be stacked or trained on a device is read from the parts'
declarations (``Needs``, ``DeviceForm``), never from which methods a part defines.

The step's gradient terms follow one rule: the loss's gradients, then every ``Proximal``
part's term (FedProx), then ``fl.weight_decay``'s coupled L2 term, then the other parts'
terms in their order.
"""

import collections
import dataclasses
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts.base import ClientPart, Needs, Outputs
from tff_noisy.federated.client_parts.proximal import Proximal

__all__ = ['ClientContext', 'ClientProgram', 'Outputs']


class ClientContext:
  """What a client's parts share during its round, inside its graph.

  Set by the kernel: ``hparams``; ``state`` (the client's state, a dict the parts'
  ``finish`` may change); ``received`` (the received ``ModelWeights``); ``predict``
  (``x -> logits`` of the model being trained, in inference mode: the received model at
  ``start``, the trained one at ``finish``); ``initial_trainable`` (the received
  trainable weights, what a proximal term pulls towards); ``dataset`` (the client's
  batches; None when stacked); ``logits``/``labels`` (``Needs.received_logits``); ``step`` (the step's
  number, from 0); ``rows``/``row_grads`` (``Needs.rows``, in ``after_step``);
  ``trained`` and ``steps`` (at ``finish``). Parts keep their own values as items,
  ``ctx[name]``.
  """

  def __init__(self, hparams, state=None, *, received=None, initial_trainable=None,
               predict=None, dataset=None, logits=None, labels=None, values=None,
               references=None):
    self.hparams = hparams
    self.state = dict(state or {})
    self.received = received
    self.initial_trainable = initial_trainable
    self.predict = predict
    self.dataset = dataset
    self.logits = logits
    self.labels = labels
    self.step = None
    self.rows = self.row_grads = None
    self.trained = self.steps = None
    self.update_scale = tf.constant(1.0)
    self.metrics = collections.OrderedDict()
    self.outputs = {}
    self._values = dict(values or {})
    self._references = references or {}

  def __getitem__(self, name):
    return self._values[name]

  def __setitem__(self, name, value):
    self._values[name] = value

  def __contains__(self, name) -> bool:
    return name in self._values

  def values(self) -> dict:
    """The parts' own values (what ``start`` computed)."""
    return dict(self._values)

  def reference(self, name: str, weights):
    """Sets frozen copy ``name``'s weights (``ModelWeights``); returns ``x -> (features,
    logits)`` of it in inference mode."""
    variables, apply = self._references[name]
    tf.nest.map_structure(lambda v, t: v.assign(t), variables, weights)
    return apply

  def report(self, name: str, value) -> None:
    """A per-client scalar metric named in the part's ``Needs.metrics``."""
    self.metrics[name] = value

  def send(self, name: str, value) -> None:
    """A tensor the client sends beside its update, summed over the round's clients."""
    self.outputs[name] = value

  def scale_update(self, scale) -> None:
    """Scales the client's update (``received - trained``) by ``scale``."""
    self.update_scale = self.update_scale * scale


def _merged(parts, attribute: str, what: str) -> collections.OrderedDict:
  merged = collections.OrderedDict()
  for part in parts:
    for name, value in getattr(part, attribute).items():
      if name in merged:
        raise ValueError(f'two client parts declare the {what} {name!r}')
      merged[name] = value
  return merged


class ClientProgram:
  """The ordered ``ClientPart`` s of a method's clients, run at each lifecycle point."""

  def __init__(self, parts: Sequence[ClientPart]):
    parts = tuple(parts)
    if not parts:
      raise ValueError('a client program needs at least one client part')
    for part in parts:
      if not isinstance(part, ClientPart):
        raise TypeError(f'client parts must be ClientPart instances, got {part!r}')
    self.parts = parts
    self.state_spec = _merged(parts, 'state_spec', 'client state')
    self.hparams = _merged(parts, 'hparams', 'hparam')
    needs = [part.needs for part in parts]
    self.uses_features = any(n.features for n in needs)
    rows = [n.rows for n in needs if n.rows]
    if len(rows) > 1:
      raise ValueError(f'at most one client part may train per-example rows, got {rows}')
    self.rows = rows[0] if rows else None
    self.reference_models = tuple(name for n in needs for name in n.reference_models)
    self.metric_names = tuple(name for n in needs for name in n.metrics)
    self._logit_readers = [n.received_logits for n in needs if n.received_logits]
    self._proximal = [p for p in parts if isinstance(p, Proximal)]
    self._other_terms = [p for p in parts if not isinstance(p, Proximal)]
    self.device_context = collections.OrderedDict()
    for part in parts:
      if part.device is not None:
        for name, value in part.device.context.items():
          if name in self.device_context:
            raise ValueError(f'two client parts declare the device context {name!r}')
          self.device_context[name] = value

  # Declarations.

  def initial_state(self, labels: np.ndarray) -> collections.OrderedDict:
    state = collections.OrderedDict()
    for part in self.parts:
      state.update(part.initial_state(labels))
    return state

  def reads_received_logits(self) -> bool:
    return bool(self._logit_readers)

  def received_logits_needed(self, hparams):
    """Whether this round's ``start`` reads the received logits: True, or a bool tensor."""
    if any(reader is True for reader in self._logit_readers):
      return True
    needed = [reader(hparams) for reader in self._logit_readers]
    return needed[0] if len(needed) == 1 else tf.reduce_any(tf.stack(needed))

  def unstackable_reason(self) -> str:
    """Why clients of this program cannot be stacked exactly ('' when they can)."""
    for part in self.parts:
      if not part.needs.stackable:
        return (f'client part {type(part).__name__} is not declared stackable '
                '(Needs.stackable)')
    return ''

  def device_reason(self) -> str:
    """Why clients of this program cannot train on a device ('' when they can)."""
    for part in self.parts:
      if part.device is None:
        return f'client part {type(part).__name__} has no on-device form'
    return ''

  def describe(self) -> dict:
    """What an exported model's sidecar records of the client parts."""
    return {'parts': [dict(name=type(p).__name__, **_settings(p)) for p in self.parts]}

  # The lifecycle points, each over every part in order.

  def start(self, ctx: ClientContext) -> None:
    for part in self.parts:
      part.start(ctx)

  def batch(self, batch: dict, ctx: ClientContext) -> dict:
    for part in self.parts:
      batch = part.batch(batch, ctx)
    return batch

  def loss(self, batch: dict, out: Outputs, ctx: ClientContext):
    """The per-example loss [B]: the parts' terms summed in order."""
    total = None
    for part in self.parts:
      term = part.loss(batch, out, ctx)
      if term is not None:
        total = term if total is None else total + term
    if total is None:
      raise ValueError('no client part gives a loss term')
    return total

  def step(self, grads, weights, ctx: ClientContext, weight_decay: float) -> list:
    """The step's gradients (module doc's order)."""
    grads = list(grads)
    for part in self._proximal:
      grads = part.step(grads, weights, ctx)
    if weight_decay:
      grads = [g + weight_decay * w for g, w in zip(grads, weights)]
    for part in self._other_terms:
      grads = part.step(grads, weights, ctx)
    return grads

  def after_step(self, weights, ctx: ClientContext) -> list:
    for part in self.parts:
      weights = part.after_step(weights, ctx)
    return weights

  def finish(self, ctx: ClientContext) -> None:
    for part in self.parts:
      part.finish(ctx)

  # On a device.

  def device_start(self, predict, x, y, hparams) -> dict:
    outputs = {}
    for part in self.parts:
      if part.device.start is not None:
        outputs.update(part.device.start(predict, x, y, hparams))
    return outputs

  def device_metrics(self, outputs) -> dict:
    metrics = {}
    for part in self.parts:
      if part.device.metrics is not None:
        metrics.update(part.device.metrics(outputs))
    return {name: metrics[name] for name in self.metric_names}


def _settings(part: ClientPart) -> dict:
  """A part's plain settings (its dataclass fields, or its plain attributes)."""
  if dataclasses.is_dataclass(part):
    values = {f.name: getattr(part, f.name) for f in dataclasses.fields(part)}
  else:
    values = dict(vars(part))
  plain = lambda v: isinstance(v, (bool, int, float, str))  # pylint: disable=unnecessary-lambda-assignment
  settings = {k: v for k, v in values.items() if plain(v)}
  for value in values.values():  # One level of settings held in a dict (a loss's params).
    if isinstance(value, dict):
      settings.update({k: v for k, v in value.items() if plain(v) and isinstance(k, str)})
  return settings
