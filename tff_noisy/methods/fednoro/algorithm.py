"""FedNoRo (Wu et al., IJCAI 2023): two stages (released code wnn2000/FedNoRo).

- Stage 1, rounds 1..T_w (warm-up): every sampled client trains on logit-adjusted
  cross-entropy with its observed-label prior (``parts.py``); FedAvg aggregation.
- Detection, before round T_w + 1 (the end of stage 1), with the global model after T_w rounds: the
  per-class-loss GMM vote on every client with data (``methods.client_detection``, the
  code's nine fits). Each client's flag goes into its objective state in the driver's
  store, so it is fixed from then on and checkpointed: a resumed run does not detect
  again.
- Stage 2, rounds T_w + 1..T: clean clients keep the warm-up loss, noisy clients distil
  from the received global model with weight λ(r) (``ops.fednoro``), an hparam
  set before each round; the server aggregates with DaAgg's weights instead of
  the examples, as the aggregator's weights (``fl.aggregator``, the weighted mean in the
  paper).

The code trains every client every round; here a round's clients are the config's
sample, and DaAgg compares a noisy client with the clean clients *of its round* (a
round without a clean or a noisy client weighs by examples and says so in
``daagg.status``).

Reports: ``detection`` (once: the vote, every client's class-loss vector) with
``noisy_clients`` and ``detection_truth`` (precision and recall of the flags against the
truly noisy clients); from round T_w + 1 each round's ``kd_weight`` and ``daagg``
(status, normalised distances D_k) with ``daagg_weights`` and the weight on truly noisy
clients (``noisy_clients.DaAggWeights``).
"""

from tff_noisy.methods import client_detection
from tff_noisy.methods.fednoro import parts as fednoro_parts
from tff_noisy.methods.noisy_clients import NoisyClients
from tff_noisy.methods.recipe import Recipe
from tff_noisy.ops import fednoro as fednoro_ops


class TwoStages(client_detection.NoisyClientDetection):
  """Before round T_w + 1 the detection; from then on λ(r) before each round, and DaAgg's
  weights before the aggregator (the recipe's weighting)."""

  def before(self, round_num, state, server):
    if round_num < self.detection_round:
      return state, {}
    diagnostics = {}
    if round_num == self.detection_round:
      flags, record = self.detect(state, server)
      diagnostics.update(detection=record, noisy_clients=NoisyClients(flags))
    params = self.params
    weight = fednoro_ops.kd_weight(round_num, params.kd_weight, params.rampup_start,
                                   params.rampup_end)
    state = server.process.set_hparams(state, {fednoro_parts.KD_WEIGHT: weight})
    diagnostics['kd_weight'] = weight
    return state, diagnostics

  def __call__(self, round_num, state, client_ids, client_states, server):
    """Stage 1: the aggregator's own weights (None); stage 2: DaAgg's."""
    del state, server
    if round_num < self.detection_round:
      return None
    noisy = [bool(s[fednoro_parts.NOISY]) for s in client_states]
    return client_detection.daagg_weighting(client_ids, noisy)


def fednoro(params, setup) -> Recipe:
  """Logit-adjusted warm-up, one GMM detection, distillation and DaAgg after it."""
  stages = TwoStages(params, fednoro_parts.NOISY)
  return Recipe(parts=(fednoro_parts.FedNoRoLoss(setup.num_classes, params.temperature),),
                weighting=stages, server=(stages,))
