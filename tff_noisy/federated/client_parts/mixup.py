"""Mixup (Zhang et al. 2018) as a client part: every step trains on its batch mixed with
a permutation of itself, λ x + (1 − λ) x[π], and the loss is λ CE(y) + (1 − λ) CE(y[π])
(``ops.mixup``), in place of cross-entropy.

A batch's λ ~ Beta(α, α) and π are drawn statelessly from the round's ``mix_seed`` (an
hparam the server sets), the client's ``mix_key`` (a dataset field, the same for all its
examples) and the step's number, so a rerun or a resumed run mixes alike.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts.base import ClientPart
from tff_noisy.ops import mixup_tf

MIX_SEED = 'mix_seed'  # Hparam: the round's seed of the batches' mixing.
MIX_KEY = 'mix_key'  # Dataset field: the client's number, in every example.
_LAMBDA, _PERMUTATION = 'mix_lambda', 'mix_permutation'  # What ``batch`` adds.


@dataclasses.dataclass(frozen=True)
class Mixup(ClientPart):
  """Mixed batches and their mixed cross-entropy, λ ~ Beta(``alpha``, ``alpha``)."""

  alpha: float

  hparams = {MIX_SEED: np.int32(0)}

  def batch(self, batch, ctx):
    seed = tf.random.experimental.stateless_fold_in(
        tf.stack([ctx.hparams[MIX_SEED], batch[MIX_KEY][0]]), tf.cast(ctx.step, tf.int32))
    lam, permutation = mixup_tf.draw(seed, tf.shape(batch['y'])[0], self.alpha)
    return dict(batch, x=mixup_tf.mix(batch['x'], lam, permutation),
                **{_LAMBDA: lam, _PERMUTATION: permutation})

  def loss(self, batch, out, ctx):
    del ctx
    return mixup_tf.mixed_cross_entropy(out.logits, batch['y'], batch[_PERMUTATION],
                                        batch[_LAMBDA])
