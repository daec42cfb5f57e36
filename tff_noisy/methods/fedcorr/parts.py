"""FedCorr's client part (Xu et al., CVPR 2022; released code Xu-Jingyi/FedCorr).

Beside the loss (cross-entropy on the client's current labels, relabelled ones once the
server corrected them, or with mixup the shared part ``client_parts.Mixup``, as the
released code's command lines turn it on), in every stage. A client's state:
``noise_level`` μ̂_k (0 until the server estimates it, then the latest estimate) and
``probs`` [n, C], its trained local model's inference-mode probabilities on each of its
examples (by ``index``), written after training in the pre-processing stage only: the
server computes the client's LID score and per-sample losses from them. Two hparams the
server sets per round: ``preprocessing`` (1 in that stage) and ``beta`` (β in
pre-processing, 0 after, as the code resets it), so each step adds the gradient of the
adaptive proximal term β μ̂_k ‖w − w_g‖ over the trainable weights
(``ops.fedcorr.proximal_gradients`` is its NumPy twin).
"""

import collections
import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract

NOISE_LEVEL = 'noise_level'
PROBS = 'probs'
PREPROCESSING = 'preprocessing'
BETA = 'beta'


class AdaptiveProximal(contract.ClientPart):
  """The adaptive proximal term and the local model's outputs for the server."""

  def __init__(self, num_classes: int):
    self.num_classes = int(num_classes)
    self.hparams = {PREPROCESSING: np.int32(0), BETA: np.float32(0.0)}
    self.state_spec = collections.OrderedDict([
        (NOISE_LEVEL, tf.TensorSpec([], tf.float32)),
        (PROBS, tf.TensorSpec([None, self.num_classes], tf.float32))])

  def initial_state(self, labels: np.ndarray) -> collections.OrderedDict:
    """μ̂ = 0; no outputs yet (zeros)."""
    return collections.OrderedDict([
        (NOISE_LEVEL, np.float32(0.0)),
        (PROBS, np.zeros((len(labels), self.num_classes), np.float32))])

  def start(self, ctx):
    ctx['proximal'] = ctx.hparams[BETA] * ctx.state[NOISE_LEVEL]

  def step(self, grads, weights, ctx):
    diffs = [w - w0 for w, w0 in zip(weights, ctx.initial_trainable)]
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(d)) for d in diffs]))
    scale = tf.where(norm > 0, ctx['proximal'] / tf.maximum(norm, 1e-30),
                     tf.zeros_like(norm))
    return [g + scale * d for g, d in zip(grads, diffs)]

  def finish(self, ctx):
    predict, dataset, table = ctx.predict, ctx.dataset, ctx.state[PROBS]

    def outputs():
      return contract.example_probabilities(predict, dataset, tf.zeros_like(table))

    ctx.state[PROBS] = tf.cond(tf.equal(ctx.hparams[PREPROCESSING], 1), outputs,
                               lambda: table)
