"""End-to-end label correction on flagged clients, shared by MaskedOptim (Jiang et al.
2025, §4.1-4.2) and FedELC (Jiang et al. 2024, its predecessor: the ``code`` variant
without the mask, β = 0.2, no pre-merge), with the server step that detects the noisy
clients once and then reports their flags and corrected labels.

A client's state (checkpointed by the driver's store) is its detection flag ``noisy``
(0 until the server's detection, then fixed) and its per-sample label logits
``label_logits`` ỹ [n, C], initialised to K·onehot(ŷ) and rewritten only while the
client is noisy. The part, per client:

- clean (and every client during warm-up, when no flag is set yet): ``start`` counts
  the client's *observed* labels on the client (a label-only pass) into the class prior
  π (floored at 1e-8) and training uses cross-entropy of z + log π (Eq. 4); the label
  logits get a zero gradient and stay as they are; the update is not scaled;
- noisy: the label-distribution loss of ``ops.label_distribution`` (paper or code
  variant, with or without the mask) on the batch's rows of ỹ, gathered by the dataset's
  ``index``; the rows take their own plain gradient step ỹ ← ỹ − η ∇ (``after_step``);
  after local training ``finish`` merges ỹ with the trained model's eval-mode
  probabilities, ỹ ← K (P + softmax(ỹ)) / 2, and pre-merges the model with the received
  one (Eq. 16), which scales the client's update by ζ.

The ``code`` variant changes only the noisy clients' loss
(docs/papers/maskedoptim.md, ambiguity 1); the released code
also passes the warm-up and clean clients' logits through LogitClip, which is not done
here. The client mean of ``noisy_client`` (the share of the round's clients that trained
as noisy) is reported under ``objective``.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts import ClientPart, example_probabilities, Needs
from tff_noisy.methods import client_detection
from tff_noisy.methods.noisy_clients import LabelEstimates, NoisyClients
from tff_noisy.ops import label_distribution
from tff_noisy.ops import label_distribution_tf

NOISY = 'noisy'
LABEL_LOGITS = 'label_logits'


class MaskedOptimLoss(ClientPart):
  """Logit-adjusted CE for clean clients; end-to-end label correction for noisy ones."""

  needs = Needs(rows=LABEL_LOGITS, metrics=('noisy_client',))

  def __init__(self, num_classes: int, *, alpha: float = 0.5, beta: float = 0.1,
               tau: float = 0.8, label_lr: float = 1000.0,
               label_scale: float = label_distribution.LABEL_SCALE, zeta: float = 0.8,
               mask: bool = True, variant: str = 'paper', clip: float = 1.0):
    if variant not in label_distribution.VARIANTS:
      raise ValueError(f"variant must be one of {', '.join(label_distribution.VARIANTS)}, "
                       f'got {variant!r}')
    self.num_classes = int(num_classes)
    self.loss_args = dict(alpha=float(alpha), beta=float(beta), tau=float(tau),
                          mask=bool(mask), variant=variant, clip=float(clip))
    self.label_lr = float(label_lr)
    self.label_scale = float(label_scale)
    self.zeta = float(zeta)
    self.state_spec = collections.OrderedDict([
        (NOISY, tf.TensorSpec([], tf.int32)),
        (LABEL_LOGITS, tf.TensorSpec([None, self.num_classes], tf.float32))])

  def initial_state(self, labels: np.ndarray) -> collections.OrderedDict:
    """Not flagged; ỹ = K·onehot(observed labels)."""
    return collections.OrderedDict([
        (NOISY, np.int32(0)),
        (LABEL_LOGITS, label_distribution.initial_label_logits(
            labels, self.num_classes, self.label_scale))])

  def start(self, ctx):
    counts = label_distribution_tf.dataset_class_counts(ctx.dataset, self.num_classes)
    noisy = tf.equal(ctx.state[NOISY], 1)
    ctx['log_prior'] = tf.math.log(label_distribution_tf.prior_from_counts(counts))
    ctx['noisy'] = noisy
    ctx.report('noisy_client', tf.cast(noisy, tf.float32))

  def loss(self, batch, out, ctx):
    return tf.cond(
        ctx['noisy'],
        lambda: label_distribution_tf.label_distribution_loss(
            batch['y'], out.logits, out.rows, **self.loss_args),
        lambda: label_distribution_tf.logit_adjusted_cross_entropy(
            batch['y'], out.logits, ctx['log_prior']))

  def after_step(self, weights, ctx):
    if ctx.row_grads is not None:  # None: the loss did not involve the rows at all.
      ctx.rows = ctx.rows - self.label_lr * ctx.row_grads
    return weights

  def finish(self, ctx):
    predict, dataset, table = ctx.predict, ctx.dataset, ctx.state[LABEL_LOGITS]

    def merged():
      probs = example_probabilities(predict, dataset, tf.zeros_like(table))
      return label_distribution_tf.merge_label_logits(table, probs, self.label_scale)

    noisy = ctx['noisy']
    ctx.state[LABEL_LOGITS] = tf.cond(noisy, merged, lambda: table)
    ctx.scale_update(tf.where(noisy, tf.constant(self.zeta), tf.constant(1.0)))


class DetectAndReport(client_detection.NoisyClientDetection):
  """The detection before round T_w + 1; from then on, after every round, the flags and
  the noisy clients' current corrected labels (argmax of their label logits)."""

  def before(self, round_num, state, server):
    if round_num != self.detection_round:
      return state, {}
    return state, {'detection': self.detect(state, server)[1]}

  def after(self, round_num, state, server):
    if round_num < self.detection_round:
      return state, {}
    program = server.process.program
    flags, estimates = {}, {}
    for cid, (_, y) in self.clients.items():
      client = server.store.objective_state(cid, program, y)
      flags[cid] = bool(client[NOISY])
      if flags[cid]:
        estimates[cid] = label_distribution.corrected_labels(client[LABEL_LOGITS])
    return state, {'noisy_clients': NoisyClients(flags),
                   'label_estimates': LabelEstimates(estimates)}
