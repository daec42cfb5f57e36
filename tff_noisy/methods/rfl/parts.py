"""RFL's client part (Yang et al. 2022, §III; FNBench's ``LocalUpdateRFL``), on the
maths of ``ops.rfl_tf``.

The round's values come as hparams the server sets: the global centroids f_G [C, d], the
forget rate τ(t), λ_cen(t), whether pseudo-labels are used (t >= T_pl) and whether this
is the first round (t = 0). A client:

- ``start``, with a frozen copy of the received model in inference mode, over its whole
  set: the pseudo-labels ŷ_i = argmax of its logits (kept by the example's ``index``)
  and, in the first round, the per-class mean features by observed label; its local
  centroids f_k are those means in the first round, else f_G. It reports the share of
  examples whose pseudo-label is their observed label (``rfl_pseudo_label_agreement``);
- every step: the small-loss selection, the agreement of a selected example's feature
  with f_k (similarity label = observed label), the training labels and RFL's loss
  (``rfl_tf.per_example_loss``, batch mean = the code's loss);
- ``finish``: the centroid update f^c ← (1 − s²) f^c + s² f̂^c of every step, replayed in
  the steps' number over its batches with the trained model in inference mode (f̂^c the
  selected examples' mean feature of class c in the batch), then it sends f_k with the
  similarities s_k = cos(f_G^c, f_k^c) and s_k f_k, whose sums over the round's clients
  give the server f_G = Σ s_k f_k / Σ s_k.

A deviation from the code, which updates f_k after every optimiser step and uses the
updated f_k in the next step's agreement: a client's state within a round is its
per-step weights and one per-example table only, so here f_k is fixed during the round's
steps and its per-step updates run once the steps are done, on the trained model's
features (inference mode: BatchNorm's running statistics).
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts import ClientPart, Needs
from tff_noisy.ops import label_distribution_tf
from tff_noisy.ops import rfl_tf

GLOBAL_CENTROIDS = 'rfl_global_centroids'
FORGET_RATE = 'rfl_forget_rate'
LAMBDA_CEN = 'rfl_lambda_cen'
PSEUDO_LABELS = 'rfl_pseudo_labels'  # 1 from 0-based round T_pl on.
FIRST_ROUND = 'rfl_first_round'  # 1 in round 1 (the code's round 0).
MODEL = 'rfl_model'  # The frozen copy: the received model at start, the trained at finish.
# What a client sends, summed over the round's clients.
WEIGHTED = 'rfl_weighted_centroids'  # s_k f_k [C, d]
SIMILARITY = 'rfl_similarity'  # s_k [C]
CENTROIDS = 'rfl_centroids'  # f_k [C, d]
CLIENTS = 'rfl_clients'  # 1
AGREEMENT = 'rfl_pseudo_label_agreement'


class RFLLoss(ClientPart):
  """RFL's loss on the local centroids and pseudo-labels of the round's start."""

  needs = Needs(features=True, reference_models=(MODEL,), metrics=(AGREEMENT,))

  def __init__(self, num_classes: int, initial_centroids: np.ndarray, *, lambda_e: float,
               centroid_gradient: bool = False):
    initial_centroids = np.asarray(initial_centroids, np.float32)
    if initial_centroids.ndim != 2 or initial_centroids.shape[0] != num_classes:
      raise ValueError(f'initial centroids must be [{num_classes}, d], got '
                       f'{initial_centroids.shape}')
    self.num_classes = int(num_classes)
    self.lambda_e = float(lambda_e)
    self.centroid_gradient = bool(centroid_gradient)
    self.hparams = collections.OrderedDict([
        (GLOBAL_CENTROIDS, initial_centroids), (FORGET_RATE, np.float32(0.0)),
        (LAMBDA_CEN, np.float32(0.0)), (PSEUDO_LABELS, np.int32(0)),
        (FIRST_ROUND, np.int32(1))])

  def start(self, ctx):
    apply, dataset, classes = ctx.reference(MODEL, ctx.received), ctx.dataset, self.num_classes
    counts = label_distribution_tf.dataset_class_counts(dataset, classes)
    size = tf.cast(tf.reduce_sum(counts), tf.int32)
    width = ctx.hparams[GLOBAL_CENTROIDS].shape[-1]

    def collect(values, batch):
      pseudo, sums, agree = values
      features, logits = apply(batch['x'])
      predicted = tf.argmax(logits, axis=1, output_type=tf.int32)
      labels = tf.cast(batch['y'], tf.int32)
      return (tf.tensor_scatter_nd_update(pseudo, batch['index'][:, None], predicted),
              sums + tf.math.unsorted_segment_sum(features, labels, classes),
              agree + tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32)))

    pseudo, sums, agree = dataset.reduce(
        (tf.zeros([size], tf.int32), tf.zeros([classes, width]), tf.constant(0.0)), collect)
    means = sums / tf.maximum(counts, 1.0)[:, None]  # rfl.class_means: 0 for a lacking class.
    ctx['rfl_pseudo'] = pseudo
    ctx['rfl_centroids'] = tf.where(tf.equal(ctx.hparams[FIRST_ROUND], 1), means,
                                    ctx.hparams[GLOBAL_CENTROIDS])
    ctx.report(AGREEMENT, agree / tf.maximum(tf.cast(size, tf.float32), 1.0))

  def loss(self, batch, out, ctx):
    hparams, labels, centroids = ctx.hparams, batch['y'], ctx['rfl_centroids']
    selected = rfl_tf.selected_mask(out.logits, labels, hparams[FORGET_RATE])
    agree = rfl_tf.agreement_mask(out.features, labels, centroids, selected)
    targets = rfl_tf.training_labels(labels, tf.gather(ctx['rfl_pseudo'], batch['index']),
                                     agree, tf.equal(hparams[PSEUDO_LABELS], 1))
    return rfl_tf.per_example_loss(out.logits, out.features, labels, targets, centroids,
                                   selected, agree, hparams[LAMBDA_CEN], self.lambda_e,
                                   self.centroid_gradient)

  def local_centroids(self, apply, dataset, steps, centroids, forget_rate):
    """f_k after ``steps`` centroid updates over ``dataset``'s batches (repeated) with
    ``apply``'s features: the steps' updates, replayed (module doc)."""

    def update(current, batch):
      features, logits = apply(batch['x'])
      selected = rfl_tf.selected_mask(logits, batch['y'], forget_rate)
      return rfl_tf.update_centroids(current, features, batch['y'], selected,
                                     self.num_classes)

    return dataset.repeat().take(steps).reduce(centroids, update)

  def finish(self, ctx):
    apply = ctx.reference(MODEL, ctx.trained)
    local = self.local_centroids(apply, ctx.dataset, ctx.steps, ctx['rfl_centroids'],
                                 ctx.hparams[FORGET_RATE])
    similarity = rfl_tf.cosine_similarity(ctx.hparams[GLOBAL_CENTROIDS], local)
    ctx.send(WEIGHTED, similarity[:, None] * local)
    ctx.send(SIMILARITY, similarity)
    ctx.send(CENTROIDS, local)
    ctx.send(CLIENTS, tf.constant(1.0))
