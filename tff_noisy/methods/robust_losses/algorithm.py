"""The robust-loss baselines' client objectives (see the package doc)."""

from tff_noisy.methods import base
from tff_noisy.methods.robust_losses.objective import PerExampleLossObjective
from tff_noisy.ops import baseline_losses_tf


class LabelSmoothing(base.Method):

  @classmethod
  def objective(cls, params, setup):
    return PerExampleLossObjective(baseline_losses_tf.label_smoothing_cross_entropy,
                                   smoothing=params.smoothing)


class BiTempered(base.Method):

  @classmethod
  def objective(cls, params, setup):
    return PerExampleLossObjective(baseline_losses_tf.bi_tempered_logistic_loss,
                                   t1=params.t1, t2=params.t2, smoothing=params.smoothing,
                                   num_iters=params.num_iters)


class SymmetricCE(base.Method):

  @classmethod
  def objective(cls, params, setup):
    return PerExampleLossObjective(baseline_losses_tf.symmetric_cross_entropy,
                                   alpha=params.alpha, beta=params.beta,
                                   log_zero=params.log_zero)


class GeneralizedCE(base.Method):

  @classmethod
  def objective(cls, params, setup):
    return PerExampleLossObjective(baseline_losses_tf.generalized_cross_entropy, q=params.q)
