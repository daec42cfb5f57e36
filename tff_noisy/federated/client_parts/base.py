"""``ClientPart``: one piece of a client's objective, with a few lifecycle points.

A method's client side is an ordered list of parts (``methods.recipe.Recipe.parts``);
the one client kernel (``federated.client_work``) runs them, in order, at each point of a
client's round, and the stacked ``tf`` runtime and the TFLite export run the same loop:

1. ``start(ctx)`` once the client has received the global model, before any step: compute
   what the steps read (``ctx[name] = value``: a transition matrix, a class prior),
   report a per-client metric (``ctx.report``), set a frozen copy's weights
   (``ctx.reference``).
2. For each step: ``batch(batch, ctx)`` (the batch the step trains on: mixup),
   ``loss(batch, out, ctx) -> [B]`` (a per-example term, summed over the parts; None: no
   term), ``step(grads, weights, ctx) -> grads`` (terms on the weights alone added to the
   loss's gradients: a proximal term) and ``after_step(weights, ctx) -> weights`` (after
   the optimiser: SCAFFOLD's shift; per-example rows, ``ctx.rows``).
3. ``finish(ctx)`` after the local steps: the state the client keeps (``ctx.state``),
   the update's scale (``ctx.scale_update``), what it sends beside the update
   (``ctx.send``).

Declarations, with safe defaults: ``needs`` (``Needs``: what the kernel must provide and
whether the part is exact when clients are stacked), ``state_spec`` and
``initial_state`` (per-client state, checkpointed), ``hparams`` (server-decided values
broadcast each round, with their initial values) and ``device`` (``DeviceForm``: how it
trains on a device; None: it cannot). Declarations are inherited: a subclass of a shared
part that changes its loss or batch (``CrossEntropy`` is stackable and on-device) must
declare ``needs`` and ``device`` again for what it does.
"""

import dataclasses
from typing import Callable, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Needs:
  """What a part needs from the kernel, and whether it may be stacked.

  ``received_logits``: the received model's inference-mode logits of the client's
  examples and their labels (``ctx.logits``, ``ctx.labels``) at ``start``, from one pass;
  True, or ``hparams -> bool tensor`` for rounds that read them (no pass otherwise).
  ``features``: the model's penultimate features (``out.features``). ``rows``: the name
  of a ``state_spec`` entry with one row per example, trained beside the model (the
  batch's rows are ``out.rows``; ``after_step`` sets ``ctx.rows`` from ``ctx.row_grads``).
  ``reference_models``: names of frozen copies of the model (``ctx.reference``).
  ``metrics``: names of the per-client scalars ``ctx.report`` gives (their mean over the
  round's finite clients is reported). ``stackable``: the part is exact when many
  clients train stacked with padded batches (its ``start`` reads nothing but the
  received logits, its loss of an example depends on that example alone, it keeps no
  state and has no ``finish``); False, the safe default, trains one client per call.
  """
  received_logits: Union[bool, Callable] = False
  features: bool = False
  rows: Optional[str] = None
  reference_models: Tuple[str, ...] = ()
  metrics: Tuple[str, ...] = ()
  stackable: bool = False


@dataclasses.dataclass(frozen=True)
class DeviceForm:
  """How a part trains on a device (``tflite_export.training``).

  ``context``: what its ``start`` sets and its loss reads, ``{name: initial value}``,
  held by the device; ``start(predict, x, y, hparams) -> dict`` computes it over the
  client's whole local set (plus what ``metrics`` reads); ``metrics(outputs) -> {name:
  float}`` its reported metrics on the host. A part with no ``start`` needs none.
  """
  context: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  start: Optional[Callable] = None
  metrics: Optional[Callable] = None


ON_DEVICE = DeviceForm()  # A part that trains on a device as it does anywhere else.


class Outputs(NamedTuple):
  """The model's outputs on a step's batch: ``logits`` [B, C]; ``features`` (when a part
  needs them, else None); ``rows``: the batch's rows of ``Needs.rows`` (else None)."""
  logits: tf.Tensor
  features: Optional[tf.Tensor] = None
  rows: Optional[tf.Tensor] = None


class ClientPart:
  """A piece of a client's objective (module doc); every point defaults to nothing."""

  needs: Needs = Needs()
  state_spec: Mapping[str, tf.TensorSpec] = {}
  hparams: Mapping[str, np.ndarray] = {}
  device: Optional[DeviceForm] = None

  def initial_state(self, labels: np.ndarray) -> dict:
    """The part's state of a client before its first round, from its observed labels."""
    del labels
    return {}

  def start(self, ctx) -> None:
    """At the start of the client's round, on the received model."""
    del ctx  # A body beside the docstring: AutoGraph cannot convert a docstring alone.

  def batch(self, batch: dict, ctx) -> dict:
    """The batch a step trains on (``ctx.step``: the step's number); default unchanged."""
    del ctx
    return batch

  def loss(self, batch: dict, out: Outputs, ctx):
    """The part's per-example loss term [B], or None."""
    del batch, out, ctx

  def step(self, grads: list, weights: list, ctx) -> list:
    """The loss's gradients plus the part's terms on the ``weights`` alone."""
    del weights, ctx
    return grads

  def after_step(self, weights: list, ctx) -> list:
    """The weights after the optimiser's step, shifted by the part (default unchanged)."""
    del ctx
    return weights

  def finish(self, ctx) -> None:
    """After the local steps: the client's new state, update scale and outputs."""
    del ctx


def example_probabilities(logits_of, dataset, initial):
  """``initial`` [N, C] with row ``index`` of each example of ``dataset`` replaced by
  ``softmax(logits_of(x))``, in one pass (what a part's ``start`` or ``finish`` keeps per
  example: MaskedOptim's and FedCorr's local outputs, FedNoRo's teacher)."""

  def collect(probs, batch):
    return tf.tensor_scatter_nd_update(probs, batch['index'][:, None],
                                       tf.nn.softmax(logits_of(batch['x'])))

  return dataset.reduce(initial, collect)

