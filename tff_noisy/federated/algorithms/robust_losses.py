"""The noise-robust losses the papers compare against, as methods: FedAvg with another
per-example loss on every client (``ops.baseline_losses_tf``; NumPy twins in
``ops.baseline_losses``).

- ``label_smoothing``: Müller et al. 2019 (FedLN Table 1, "LS").
- ``bi_tempered``: Amid et al. 2019 (FedLN Table 1, "Bi-Temp").
- ``sce``: symmetric cross-entropy, Wang et al. 2019 (LSC's "SymCE", MaskedOptim's SCE).
- ``gce``: generalized cross-entropy, Zhang & Sabuncu 2018 (MaskedOptim's GCE).

Each works with every aggregator and client runtime, TFLite included.
"""

from tff_noisy.federated.algorithms import base
from tff_noisy.federated.objectives.robust_loss import PerExampleLossObjective
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
