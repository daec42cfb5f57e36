"""FedELC (Jiang et al., CIKM 2024; released code Sprinter1999/FedELC, as FNBench's
``LocalUpdateFedELC`` runs it): ``ops.fedelc``'s stages on the shared parts.

- Rounds 1..T_w (stage 1): every sampled client trains on logit-adjusted cross-entropy
  with its observed-label prior; FedAvg aggregation (the aggregator's own weights).
- Detection, before round T_w + 1, with the global model after T_w rounds: FedNoRo's
  per-class-loss GMM vote on every client with data (``methods.client_detection``). Each
  client's flag goes into its part state in the store (fixed, checkpointed).
- Rounds T_w + 1..T (stage 2): clean clients keep the warm-up loss; noisy clients learn
  their label logits ỹ end to end with PENCIL's loss (``methods.label_correction``'s
  part with ``ops.fedelc.loss_args``: the ``code`` variant without a mask), step them
  after every batch (``ops.fedelc``: equal to the code's once-per-epoch step) and merge
  them with the trained model's predictions, ỹ ← K (P + softmax(ỹ)) / 2, with no
  pre-merge of the model (ζ = 1). The server weighs the round's updates by DaAgg
  (``client_detection.daagg_weighting``, ``ops.fedelc.aggregation_weights``).

Reports: ``detection`` (once), then every round ``noisy_clients`` with
``detection_truth``, the noisy clients' corrected labels (``label_estimate_accuracy``)
and the ``daagg`` record with ``daagg_weights``.
"""

from tff_noisy.methods import client_detection
from tff_noisy.methods import label_correction
from tff_noisy.methods.recipe import Recipe
from tff_noisy.ops import fedelc as fedelc_ops


class TwoStages(label_correction.DetectAndReport):
  """The detection and the per-round reports; DaAgg's weights from round T_w + 1 (the
  recipe's weighting)."""

  def __call__(self, round_num, state, client_ids, client_states, server):
    """Stage 1: the aggregator's own weights (None: by examples); stage 2: DaAgg's."""
    del state, server
    if round_num < self.detection_round:
      return None
    noisy = [bool(s[label_correction.NOISY]) for s in client_states]
    return client_detection.daagg_weighting(client_ids, noisy)


def loss_part(params, num_classes: int) -> label_correction.MaskedOptimLoss:
  """FedELC's client part: logit-adjusted CE, PENCIL's loss once flagged (no pre-merge)."""
  args = fedelc_ops.loss_args(params.alpha, params.beta)
  return label_correction.MaskedOptimLoss(
      num_classes, alpha=args['alpha'], beta=args['beta'], mask=args['mask'],
      variant=args['variant'], label_lr=params.label_lr, label_scale=params.label_scale,
      zeta=1.0)


def fedelc(params, setup) -> Recipe:
  """Warm-up, one GMM detection, label correction on the noisy clients, DaAgg after it."""
  stages = TwoStages(params, label_correction.NOISY)
  return Recipe(parts=(loss_part(params, setup.num_classes),), weighting=stages,
                server=(stages,))
