"""The default loss part: cross-entropy on the batch's labels; and any per-example loss of
labels and logits in its place (the robust-loss baselines)."""

from typing import Callable

from tff_noisy.federated.client_parts.base import ClientPart, Needs, ON_DEVICE
from tff_noisy.ops import losses


class CrossEntropy(ClientPart):
  """Cross-entropy of the batch's labels (FedAvg's clients)."""

  needs = Needs(stackable=True)
  device = ON_DEVICE

  def loss(self, batch, out, ctx):
    del ctx
    return losses.cross_entropy(batch['y'], out.logits)


class PerExampleLoss(ClientPart):
  """``loss_fn(labels, logits, **params)`` per example, in place of cross-entropy."""

  needs = Needs(stackable=True)
  device = ON_DEVICE

  def __init__(self, loss_fn: Callable, **params):
    self.loss_fn = loss_fn
    self.loss_name = loss_fn.__name__
    self.params = dict(params)

  def loss(self, batch, out, ctx):
    del ctx
    return self.loss_fn(batch['y'], out.logits, **self.params)
