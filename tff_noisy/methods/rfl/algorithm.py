"""RFL (Yang et al., IEEE Intelligent Systems 2022; FNBench's ``LocalUpdateRFL`` and its
server step in ``main_fed_LNL.py``), on ``ops.rfl``.

The server keeps the global class centroids f_G [C, d] (d the model's feature width: the
input of its ``logits`` layer), a standard-normal draw before round 1, as an hparam the
clients receive (the server state, checkpointed). Before round r (the code's 0-based
t = r − 1) it sets the forget rate τ(r) (``ops.coteaching.forget_rate``: linear from 0 over
``gradual_rounds``), λ_cen(t) (``rfl.lambda_cen_weight``), the pseudo-label switch
t >= T_pl and the first-round flag. The clients train with RFL's loss (``parts``) and
send their local centroids; after the round the server sets f_G^c = Σ_k s_k f_k^c /
Σ_k s_k, s_k = cos(f_G^c, f_k^c) (``rfl.aggregate_centroids``), from the sums the clients
sent. The model is aggregated by the configured aggregator (FedAvg in the code).

Reports: every round ``rfl`` (τ, λ_cen, whether pseudo-labels are used),
``rfl_centroid_change`` (per class, the cosine between the new and the old f_G) and the
client mean of ``rfl_pseudo_label_agreement`` under ``objective``.
"""

import numpy as np

import models
from tff_noisy.methods.recipe import Recipe, ServerStep
from tff_noisy.methods.rfl import parts as rfl_parts
from tff_noisy.ops import coteaching
from tff_noisy.ops import fedrn
from tff_noisy.ops import rfl as rfl_ops


def aggregated_centroids(global_centroids, weighted, similarity, centroids,
                         clients) -> np.ndarray:
  """``rfl.aggregate_centroids`` from the clients' sums: Σ s_k f_k / Σ s_k per class, the
  plain mean Σ f_k / K where Σ s_k = 0; f_G unchanged when no client sent any."""
  global_centroids = np.asarray(global_centroids, np.float64)
  if float(clients) <= 0:
    return global_centroids
  similarity = np.asarray(similarity, np.float64)
  with np.errstate(invalid='ignore', divide='ignore'):
    weighted_mean = np.asarray(weighted, np.float64) / similarity[:, None]
  mean = np.asarray(centroids, np.float64) / float(clients)
  return np.where((similarity != 0)[:, None], weighted_mean, mean)


class GlobalCentroids(ServerStep):
  """Before a round: its schedule's hparams; after it: f_G from the clients' centroids."""

  def __init__(self, params):
    self.params = params

  def before(self, round_num, state, server):
    params, process = self.params, server.process
    t = round_num - 1
    values = {
        rfl_parts.FORGET_RATE: coteaching.forget_rate(round_num, params.forget_rate,
                                                      params.gradual_rounds),
        rfl_parts.LAMBDA_CEN: rfl_ops.lambda_cen_weight(t, params.lambda_cen,
                                                        params.pseudo_label_round),
        rfl_parts.PSEUDO_LABELS: int(t >= params.pseudo_label_round),
        rfl_parts.FIRST_ROUND: int(t == 0)}
    state = process.set_hparams(state, dict(process.get_hparams(state), **values))
    return state, {'rfl': {'forget_rate': values[rfl_parts.FORGET_RATE],
                           'lambda_cen': values[rfl_parts.LAMBDA_CEN],
                           'pseudo_labels': bool(values[rfl_parts.PSEUDO_LABELS])}}

  def after(self, round_num, state, server):
    del round_num
    process, outputs = server.process, server.outputs or {}
    hparams = process.get_hparams(state)
    old = np.asarray(hparams[rfl_parts.GLOBAL_CENTROIDS], np.float64)
    if rfl_parts.CLIENTS not in outputs:
      return state, {}
    new = aggregated_centroids(old, outputs[rfl_parts.WEIGHTED],
                               outputs[rfl_parts.SIMILARITY], outputs[rfl_parts.CENTROIDS],
                               outputs[rfl_parts.CLIENTS])
    state = process.set_hparams(state, dict(hparams, **{rfl_parts.GLOBAL_CENTROIDS: new}))
    return state, {'rfl_centroid_change': [float(s) for s in fedrn.cosine_similarity(new, old)]}


def initial_centroids(num_classes: int, feature_dim: int, seed: int) -> np.ndarray:
  """f_G before round 1: a standard-normal [C, d] draw (the code's ``torch.randn``)."""
  return np.random.default_rng([seed, 7]).standard_normal(
      (num_classes, feature_dim)).astype(np.float32)


def rfl(params, setup) -> Recipe:
  """RFL's clients and the server's centroid step."""
  feature_dim = models.feature_dim(setup.model_fn())
  return Recipe(parts=(rfl_parts.RFLLoss(
      setup.num_classes, initial_centroids(setup.num_classes, feature_dim, setup.seed),
      lambda_e=params.lambda_e, centroid_gradient=params.centroid_gradient),),
                server=(GlobalCentroids(params),))
