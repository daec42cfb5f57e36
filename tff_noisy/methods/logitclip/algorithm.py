"""LogitClip's clients: the per-example loss ``baseline_losses_tf.logit_clip_cross_entropy``
in place of cross-entropy; the server is FedAvg's (the configured aggregator)."""

from tff_noisy.methods import base
from tff_noisy.federated.client_parts import PerExampleLoss
from tff_noisy.ops import baseline_losses_tf


class LogitClip(base.Method):

  @classmethod
  def client_parts(cls, params, setup):
    del setup
    return [PerExampleLoss(
        baseline_losses_tf.logit_clip_cross_entropy, tau=params.tau, p=params.p)]
