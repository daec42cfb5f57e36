"""FedLSR's client part (Jiang et al. 2022, §4; FNBench's ``LocalUpdateFedLSR``), on the
maths of ``ops.fedlsr_tf``.

Each step's batch of B examples becomes one of 2B (``batch``): x, then its second view
x' = t(x) (``fedlsr_tf.second_view``: FNBench's CIFAR augmentation for RGB images, the
notebook's rotation for one-channel ones), every other field repeated. One forward pass
gives z₁ (first half) and z₂ (second half); the loss (``loss``) is FedLSR's per-example
loss ce + γ(t) distill + γ_e entropy of the first half's examples, times 2, and 0 for
the second half, so the step's mean over the 2B entries is the code's batch loss and its
gradient the code's (gradients flow through both views, as in the code). The view's
draw and the batch's mixing weight λ ~ Beta(1, 1) come statelessly from the round's
``lsr_seed`` (an hparam), the client's key (the ``mix_key`` field) and the step's number;
γ(t) is the ``lsr_distill_weight`` hparam the server sets every round.

``aggregation_weight`` is 1 on the first half and 0 on the second, so the client's
update weight is its number of examples. Two deviations from the code's two forward
passes: BatchNorm layers see the 2B examples as one batch (statistics over both views),
and the round's training accuracy and example counts count both views.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods.contract import ClientPart, MIX_KEY, Needs
from tff_noisy.methods.two_views import doubled_batch
from tff_noisy.ops import fedlsr_tf

DISTILL_WEIGHT = 'lsr_distill_weight'
SEED = 'lsr_seed'
_MIX = 'lsr_mix'  # The step's λ, from ``batch`` to ``loss``.


def step_seeds(round_seed, client_key, step):
  """``(view seed, mix seed)`` of one step (int32 [2] each), stateless."""
  seed = tf.random.experimental.stateless_fold_in(
      tf.stack([tf.cast(round_seed, tf.int32), tf.cast(client_key, tf.int32)]),
      tf.cast(step, tf.int32))
  view, mix = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
  return view, mix


class SelfRegularisation(ClientPart):
  """FedLSR's loss on the two halves of the doubled batch."""

  needs = Needs()  # Not stackable: an example's loss reads its second view's logits.
  hparams = {DISTILL_WEIGHT: np.float32(0.0), SEED: np.int32(0)}

  def __init__(self, entropy_weight: float, *, variant: str = 'code',
               inverse_temperature: float = 3.0):
    self.entropy_weight = float(entropy_weight)
    self.variant = variant
    self.inverse_temperature = float(inverse_temperature)

  def batch(self, batch, ctx):
    if batch['x'].shape.rank != 4:
      raise ValueError(f"FedLSR's second view needs images [B, H, W, channels], got inputs "
                       f"of shape {batch['x'].shape}")
    view_seed, mix_seed = step_seeds(ctx.hparams[SEED], batch[MIX_KEY][0], ctx.step)
    ctx[_MIX] = fedlsr_tf.draw_mix(mix_seed)
    return doubled_batch(batch, fedlsr_tf.second_view(batch['x'], view_seed))

  def loss(self, batch, out, ctx):
    half = tf.shape(batch['y'])[0] // 2
    per_example = fedlsr_tf.fedlsr_loss(
        batch['y'][:half], out.logits[:half], out.logits[half:], ctx[_MIX],
        ctx.hparams[DISTILL_WEIGHT], self.entropy_weight, variant=self.variant,
        inverse_temperature=self.inverse_temperature)
    return tf.concat([2.0 * per_example, tf.zeros_like(per_example)], axis=0)
