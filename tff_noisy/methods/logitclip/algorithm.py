"""LogitClip's recipe: the per-example loss ``baseline_losses_tf.logit_clip_cross_entropy``
in place of cross-entropy; the server is FedAvg's (the configured aggregator)."""

from tff_noisy.federated.client_parts import PerExampleLoss
from tff_noisy.methods.recipe import Recipe
from tff_noisy.ops import baseline_losses_tf


def logitclip(params, setup) -> Recipe:
  del setup
  return Recipe(parts=(PerExampleLoss(
      baseline_losses_tf.logit_clip_cross_entropy, tau=params.tau, p=params.p),))
