"""FedNoRo's client side (Wu et al., IJCAI 2023: logit-adjusted warm-up, knowledge distillation).

A client's state is its detection flag ``noisy`` (0 until the server's detection after
warm-up, then fixed). The prologue counts the client's observed labels into its class
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

from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import fednoro_tf
from tff_noisy.ops import label_distribution_tf

NOISY = 'noisy'
KD_WEIGHT = 'kd_weight'


class FedNoRoObjective(ClientObjective):
  """Logit-adjusted CE for clean clients; plus distillation from the global model for
  noisy ones."""

  metric_names = ('noisy_client',)
  per_example_loss = True  # An example's loss reads its own teacher row.
  hparams = {KD_WEIGHT: np.float32(0.0)}

  def __init__(self, num_classes: int, temperature: float):
    super().__init__()
    if temperature <= 0:
      raise ValueError(f'temperature must be > 0, got {temperature}')
    self.num_classes = int(num_classes)
    self.temperature = float(temperature)
    self.state_spec = collections.OrderedDict([(NOISY, tf.TensorSpec([], tf.int32))])

  def initial_state(self, labels: np.ndarray) -> collections.OrderedDict:
    del labels
    return collections.OrderedDict([(NOISY, np.int32(0))])

  def prologue(self, predict, dataset, state, hparams):
    del hparams
    counts = label_distribution_tf.dataset_class_counts(dataset, self.num_classes)
    noisy = tf.equal(state[NOISY], 1)
    empty = tf.zeros([tf.cast(tf.reduce_sum(counts), tf.int32), self.num_classes])

    def teacher():
      def collect(probs, batch):
        return tf.tensor_scatter_nd_update(
            probs, batch['index'][:, None],
            tf.nn.softmax(predict(batch['x']) / self.temperature))
      return dataset.reduce(empty, collect)

    return {'log_prior': tf.math.log(label_distribution_tf.prior_from_counts(counts)),
            'present': counts > 0, 'noisy': noisy,
            'teacher': tf.cond(noisy, teacher, lambda: empty),
            'noisy_client': tf.cast(noisy, tf.float32)}

  def loss(self, batch, logits, features, context, hparams, rows):
    del features, rows
    return tf.cond(
        context['noisy'],
        lambda: fednoro_tf.logit_adjusted_kd_loss(
            batch['y'], logits, tf.gather(context['teacher'], batch['index']),
            context['log_prior'], context['present'], hparams[KD_WEIGHT]),
        lambda: label_distribution_tf.logit_adjusted_cross_entropy(
            batch['y'], logits, context['log_prior']))
