"""FedCorr's client side (Xu et al., CVPR 2022; released code Xu-Jingyi/FedCorr).

Cross-entropy on the client's current labels (relabelled ones once the server corrected
them) in every stage. A client's state: ``noise_level`` μ̂_k (0 until the server
estimates it, then the latest estimate) and ``probs`` [n, C], its trained local model's
inference-mode probabilities on each of its examples (by ``index``), written after
training in the pre-processing stage only: the server computes the client's LID score and
per-sample losses from them. Two hparams the server sets per round: ``preprocessing``
(1 in that stage) and ``beta`` (β in pre-processing, 0 after, as the code resets it),
so each step adds the gradient of the adaptive proximal term β μ̂_k ‖w − w_g‖ over the
trainable weights (``ops.fedcorr.proximal_gradients`` is its NumPy twin).

With mixup (the released code's command lines turn it on), every step trains on its
batch mixed with a permutation of itself and the two labels' cross-entropies weighted λ
and 1 − λ (``ops.mixup``). A batch's λ and permutation are drawn statelessly from the
round's ``mix_seed`` (an hparam), the client's ``mix_key`` (a dataset field, the same
for all its examples) and the step's number, so a rerun or a resumed run mixes alike.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf

from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import losses
from tff_noisy.ops import mixup_tf

NOISE_LEVEL = 'noise_level'
PROBS = 'probs'
PREPROCESSING = 'preprocessing'
BETA = 'beta'
MIX_SEED = 'mix_seed'  # Hparam: the round's seed of the batches' mixing.
MIX_KEY = 'mix_key'  # Dataset field: the client's number, in every example.
_LAMBDA, _PERMUTATION = 'mix_lambda', 'mix_permutation'  # What mix_batch adds.


class FedCorrObjective(ClientObjective):
  """Cross-entropy (on mixed batches when ``mixup_alpha`` is given), the adaptive
  proximal term, the local model's outputs for the server."""

  per_example_loss = False  # Mixup pairs the examples of a batch.

  def __init__(self, num_classes: int, mixup_alpha: Optional[float] = None):
    super().__init__()
    self.num_classes = int(num_classes)
    self.mixup_alpha = None if mixup_alpha is None else float(mixup_alpha)
    self.hparams = {PREPROCESSING: np.int32(0), BETA: np.float32(0.0)}
    if self.mixup_alpha is not None:
      self.hparams[MIX_SEED] = np.int32(0)
    self.state_spec = collections.OrderedDict([
        (NOISE_LEVEL, tf.TensorSpec([], tf.float32)),
        (PROBS, tf.TensorSpec([None, self.num_classes], tf.float32))])

  def initial_state(self, labels: np.ndarray) -> collections.OrderedDict:
    """μ̂ = 0; no outputs yet (zeros)."""
    return collections.OrderedDict([
        (NOISE_LEVEL, np.float32(0.0)),
        (PROBS, np.zeros((len(labels), self.num_classes), np.float32))])

  def prologue(self, predict, dataset, state, hparams):
    del predict, dataset
    return {'proximal': hparams[BETA] * state[NOISE_LEVEL]}

  def mix_batch(self, batch, step, hparams):
    """The batch mixed with a permutation of itself (module doc); unchanged without
    mixup."""
    if self.mixup_alpha is None:
      return batch
    seed = tf.random.experimental.stateless_fold_in(
        tf.stack([hparams[MIX_SEED], batch[MIX_KEY][0]]), tf.cast(step, tf.int32))
    lam, permutation = mixup_tf.draw(seed, tf.shape(batch['y'])[0], self.mixup_alpha)
    return dict(batch, x=mixup_tf.mix(batch['x'], lam, permutation),
                **{_LAMBDA: lam, _PERMUTATION: permutation})

  def loss(self, batch, logits, features, context, hparams, rows):
    """Cross-entropy; with mixup λ CE(y) + (1 − λ) CE(y_π) (``ops.mixup``)."""
    del features, context, hparams, rows
    if _LAMBDA not in batch:
      return losses.cross_entropy(batch['y'], logits)
    return mixup_tf.mixed_cross_entropy(logits, batch['y'], batch[_PERMUTATION],
                                        batch[_LAMBDA])

  def weight_gradients(self, trainable, initial_trainable, context, hparams):
    del hparams
    diffs = [w - w0 for w, w0 in zip(trainable, initial_trainable)]
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(d)) for d in diffs]))
    scale = tf.where(norm > 0, context['proximal'] / tf.maximum(norm, 1e-30),
                     tf.zeros_like(norm))
    return [scale * d for d in diffs]

  def epilogue(self, predict, dataset, context, state, hparams):
    del context
    table = state[PROBS]

    def outputs():
      def collect(probs, batch):
        return tf.tensor_scatter_nd_update(probs, batch['index'][:, None],
                                           tf.nn.softmax(predict(batch['x'])))
      return dataset.reduce(tf.zeros_like(table), collect)

    new_table = tf.cond(tf.equal(hparams[PREPROCESSING], 1), outputs, lambda: table)
    return collections.OrderedDict([(NOISE_LEVEL, state[NOISE_LEVEL]),
                                    (PROBS, new_table)]), tf.constant(1.0)
