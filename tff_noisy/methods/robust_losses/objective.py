"""A client objective that is one per-example loss of the labels and logits.

The noise-robust baselines the papers compare against (``algorithm.py``)
each train with one of ``ops.baseline_losses_tf`` in place of cross-entropy; nothing else
changes, so their clients stack (``runtime.stacked``) and train on devices.
"""

from typing import Callable

from tff_noisy.federated.objectives.base import ClientObjective


class PerExampleLossObjective(ClientObjective):
  """``loss_fn(labels, logits, **params)`` per example in place of cross-entropy."""

  per_example_loss = True  # Each loss_fn reads one example's label and logits.

  def __init__(self, loss_fn: Callable, **params):
    super().__init__()
    self.loss_fn = loss_fn
    self.params = dict(params)

  def loss(self, batch, logits, features, context, hparams, rows):
    del features, context, hparams, rows
    return self.loss_fn(batch['y'], logits, **self.params)

  def describe(self) -> dict:
    return dict(super().describe(), loss=self.loss_fn.__name__, **self.params)
