"""The robust-loss baselines' client parts: one per-example loss each in place of
cross-entropy (see the package doc)."""

from tff_noisy.methods import base
from tff_noisy.federated.client_parts import PerExampleLoss
from tff_noisy.ops import baseline_losses_tf


class LabelSmoothing(base.Method):

  @classmethod
  def client_parts(cls, params, setup):
    return [PerExampleLoss(
        baseline_losses_tf.label_smoothing_cross_entropy, smoothing=params.smoothing)]


class BiTempered(base.Method):

  @classmethod
  def client_parts(cls, params, setup):
    return [PerExampleLoss(
        baseline_losses_tf.bi_tempered_logistic_loss, t1=params.t1, t2=params.t2,
        smoothing=params.smoothing, num_iters=params.num_iters)]


class SymmetricCE(base.Method):

  @classmethod
  def client_parts(cls, params, setup):
    return [PerExampleLoss(
        baseline_losses_tf.symmetric_cross_entropy, alpha=params.alpha, beta=params.beta,
        log_zero=params.log_zero)]


class GeneralizedCE(base.Method):

  @classmethod
  def client_parts(cls, params, setup):
    return [PerExampleLoss(
        baseline_losses_tf.generalized_cross_entropy, q=params.q)]
