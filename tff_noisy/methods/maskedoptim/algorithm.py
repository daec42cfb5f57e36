"""MaskedOptim (Jiang et al. 2025): noisy-client detection, masked end-to-end label
correction, geometric-median aggregation (docs/papers/maskedoptim.md).

- Rounds 1..T_w (warm-up): every sampled client trains on cross-entropy of its logits
  adjusted by its observed-label class prior (``methods.label_correction``).
- Detection, before round T_w + 1, with the global model after T_w rounds: a probe runs
  on *every* client with data (not only the round's sample) and returns its per-class
  mean cross-entropy in inference mode (NaN for a class it lacks); the server fills,
  scales and votes over 9 two-component GMM fits (``ops.detection``). Each client's flag
  and fresh label logits K·onehot(ŷ) are written to the driver's store, so the flags are
  fixed from then on and, with the label logits every noisy client learns, checkpointed:
  a run resumed after the detection round reads them back and does not detect again.
  Fewer than 2 clients, or a vote with one side empty, flag nobody (the round's
  ``detection`` record says why).
- Rounds T_w + 1..T: clean clients keep the warm-up loss; noisy clients learn their
  label distributions end to end, merge them with their model's predictions and
  pre-merge their model with the received one.
- Aggregation: the config's ``fl.aggregator``. MaskedOptim's is the per-tensor geometric
  median (``geometric_median_per_tensor``), which a config names explicitly: the engine
  has no per-method default aggregator (``fl.aggregator`` defaults to ``mean``, which is
  the "FedAvg aggregation" row of the paper's ablation).

State size: every client's store entry holds its flag and [n_k, C] float32 label
logits (clean clients' stay at K·onehot: the client work gathers rows from every
client's table), so a checkpoint carries 4·C bytes per training example (800 kB for
20,000 examples and 10 classes).

Reports: ``detection`` (once: status, flagged clients, the vote and every client's
class-loss vector) and, every round from T_w + 1 on (``diagnose``), the flags and the
noisy clients' current corrected labels, which the driver scores against the simulation
truth (``detection_truth``, ``label_estimate_accuracy``).
"""

from tff_noisy.methods import label_correction
from tff_noisy.methods.recipe import Recipe


def maskedoptim(params, setup) -> Recipe:
  """Warm-up, one GMM detection on all clients, label correction on the noisy ones."""
  return Recipe(parts=(label_correction.MaskedOptimLoss(
      setup.num_classes, alpha=params.alpha, beta=params.beta_value(), tau=params.tau,
      label_lr=params.label_lr, label_scale=params.label_scale, zeta=params.zeta,
      mask=params.mask, variant=params.loss_variant, clip=params.logit_clip),),
                server=(label_correction.DetectAndReport(params, label_correction.NOISY),))
