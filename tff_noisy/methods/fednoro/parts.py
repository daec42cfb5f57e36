"""FedNoRo's client part (Wu et al., IJCAI 2023: logit-adjusted warm-up, knowledge distillation).

A client's state is its detection flag ``noisy`` (0 until the server's detection after
warm-up, then fixed). Its ``start`` counts the client's observed labels into its class
prior π (floored like MaskedOptim's) and, for a noisy client, the received global
model's (the teacher's) probabilities softmax(z_g / T) on every example, kept by the
example's ``index``. The per-example loss:

- clean (and every client in warm-up): logit-adjusted cross-entropy -log softmax(z +
  log π)_ŷ (Menon et al. 2021);
- noisy: ``fednoro_tf.logit_adjusted_kd_loss`` with the round's distillation weight λ,
  an hparam the server sets every round (``ops.fednoro.kd_weight``).

The client mean of ``noisy_client`` (the share of the round's clients that distilled)
is reported under ``objective``.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts import ClientPart, example_probabilities, Needs
from tff_noisy.ops import fednoro_tf
from tff_noisy.ops import label_distribution_tf

NOISY = 'noisy'
KD_WEIGHT = 'kd_weight'


class FedNoRoLoss(ClientPart):
  """Logit-adjusted CE for clean clients; plus distillation from the global model for
  noisy ones."""

  needs = Needs(metrics=('noisy_client',))
  hparams = {KD_WEIGHT: np.float32(0.0)}

  def __init__(self, num_classes: int, temperature: float):
    if temperature <= 0:
      raise ValueError(f'temperature must be > 0, got {temperature}')
    self.num_classes = int(num_classes)
    self.temperature = float(temperature)
    self.state_spec = collections.OrderedDict([(NOISY, tf.TensorSpec([], tf.int32))])

  def initial_state(self, labels: np.ndarray) -> collections.OrderedDict:
    del labels
    return collections.OrderedDict([(NOISY, np.int32(0))])

  def start(self, ctx):
    predict, dataset, state = ctx.predict, ctx.dataset, ctx.state
    counts = label_distribution_tf.dataset_class_counts(dataset, self.num_classes)
    noisy = tf.equal(state[NOISY], 1)
    empty = tf.zeros([tf.cast(tf.reduce_sum(counts), tf.int32), self.num_classes])

    def teacher():
      return example_probabilities(lambda x: predict(x) / self.temperature, dataset, empty)

    ctx['log_prior'] = tf.math.log(label_distribution_tf.prior_from_counts(counts))
    ctx['present'] = counts > 0
    ctx['noisy'] = noisy
    ctx['teacher'] = tf.cond(noisy, teacher, lambda: empty)
    ctx.report('noisy_client', tf.cast(noisy, tf.float32))

  def loss(self, batch, out, ctx):
    return tf.cond(
        ctx['noisy'],
        lambda: fednoro_tf.logit_adjusted_kd_loss(
            batch['y'], out.logits, tf.gather(ctx['teacher'], batch['index']),
            ctx['log_prior'], ctx['present'], ctx.hparams[KD_WEIGHT]),
        lambda: label_distribution_tf.logit_adjusted_cross_entropy(
            batch['y'], out.logits, ctx['log_prior']))
