"""LogitClip's clients: the per-example loss ``baseline_losses_tf.logit_clip_cross_entropy``
in place of cross-entropy; the server is FedAvg's (the configured aggregator)."""

from tff_noisy.methods import base
from tff_noisy.methods.robust_losses.objective import PerExampleLossObjective
from tff_noisy.ops import baseline_losses_tf


class LogitClip(base.Method):

  @classmethod
  def objective(cls, params, setup):
    del setup
    return PerExampleLossObjective(baseline_losses_tf.logit_clip_cross_entropy,
                                   tau=params.tau, p=params.p)
