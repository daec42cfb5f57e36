"""The robust-loss baselines' recipes: one per-example loss each in place of
cross-entropy (see the package doc); the server is FedAvg's."""

from tff_noisy.federated.client_parts import PerExampleLoss
from tff_noisy.methods.recipe import Recipe
from tff_noisy.ops import baseline_losses_tf


def label_smoothing(params, setup) -> Recipe:
  del setup
  return Recipe(parts=(PerExampleLoss(
      baseline_losses_tf.label_smoothing_cross_entropy, smoothing=params.smoothing),))


def bi_tempered(params, setup) -> Recipe:
  del setup
  return Recipe(parts=(PerExampleLoss(
      baseline_losses_tf.bi_tempered_logistic_loss, t1=params.t1, t2=params.t2,
      smoothing=params.smoothing, num_iters=params.num_iters),))


def symmetric_ce(params, setup) -> Recipe:
  del setup
  return Recipe(parts=(PerExampleLoss(
      baseline_losses_tf.symmetric_cross_entropy, alpha=params.alpha, beta=params.beta,
      log_zero=params.log_zero),))


def generalized_ce(params, setup) -> Recipe:
  del setup
  return Recipe(parts=(PerExampleLoss(
      baseline_losses_tf.generalized_cross_entropy, q=params.q),))
