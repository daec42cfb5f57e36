"""DivideMix's client part (Li et al. 2020, Algorithm 1, on ``ops.dividemix_tf``), on the
two-network model (``methods.two_networks``: its features are [f's logits, g's logits]).

- ``start`` (after warm-up, hparam ``active``): each network's cross-entropy of every
  example of the client, from a frozen copy of the received model in inference mode; a
  two-component GMM fitted to each (``dividemix_tf.clean_probability``) gives w^f, w^g
  [n], kept as the client's state ``clean_probability`` [n, 2] (-1 before its first
  division) for the server's report. Once per round, not per local epoch as the codes.
- ``batch``: B examples become 2B: x, then the MixMatch-mixed x' = λ' x + (1 − λ') x[π]
  (λ' = max(λ, 1 − λ), λ ~ Beta(α, α); one draw per step from the round's ``mix_seed``,
  the client's ``mix_key`` and the step), every other field repeated; in warm-up x' = x.
- ``loss``: the first half's logits (training mode, no gradient into the targets, as the
  codes' no-grad pass) give the targets; network f is trained on g's division (labelled:
  w^g > τ; co-refined Sharpen(w^g y + (1 − w^g) p_f, T)) and g on f's, the unlabelled
  rows take the co-guess Sharpen((p_f + p_g)/2, T); the targets are mixed with the inputs'
  λ', π and each network's loss on the second half is L_X + λ_u(t) L_U + λ_r L_reg
  (``masked_per_example_loss``; a mixed row is in X' when its own example is labelled).
  Per entry: 2·ℓ on the second half, 0 on the first (the step's mean is the sum of both
  networks' losses); in warm-up 2·(CE_f + CE_g) on the first half, 0 on the second.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.ops import dividemix_tf
from tff_noisy.ops import losses as losses_tf
from tff_noisy.ops import mixup_tf

ACTIVE = 'dividemix_active'
ROUND = 'dividemix_round'
CLEAN_PROBABILITY = 'clean_probability'
RECEIVED = 'dividemix_received'
_W, _BATCHES, _MIX = 'dividemix_w', 'dividemix_batches', 'dividemix_mix'


class DivideMixLoss(contract.ClientPart):
  """Warm-up cross-entropy, then DivideMix's co-divided MixMatch loss on both networks."""

  # Not stackable: per-client GMM, state, mixing within a batch.
  needs = contract.Needs(features=True, reference_models=(RECEIVED,))
  hparams = {ACTIVE: np.float32(0.0), ROUND: np.float32(0.0), contract.MIX_SEED: np.int32(0)}
  state_spec = {CLEAN_PROBABILITY: tf.TensorSpec([None, 2], tf.float32)}

  def __init__(self, num_classes: int, warmup_rounds: int, threshold: float = 0.5,
               temperature: float = 0.5, alpha: float = 4.0, lambda_u: float = 25.0,
               lambda_r: float = 1.0):
    self.num_classes = int(num_classes)
    self.warmup_rounds = int(warmup_rounds)
    self.threshold = float(threshold)
    self.temperature = float(temperature)
    self.alpha = float(alpha)
    self.lambda_u = float(lambda_u)
    self.lambda_r = float(lambda_r)

  def initial_state(self, labels):
    return {CLEAN_PROBABILITY: np.full((len(labels), 2), -1.0, np.float32)}

  def _split(self, both):
    return both[:, :self.num_classes], both[:, self.num_classes:]

  def start(self, ctx):
    apply = ctx.reference(RECEIVED, ctx.received)
    dataset, previous = ctx.dataset, ctx.state[CLEAN_PROBABILITY]

    def divide():
      def collect(carry, batch):
        table, count = carry
        f, g = self._split(apply(batch['x'])[0])
        ce = tf.stack([losses_tf.cross_entropy(batch['y'], f),
                       losses_tf.cross_entropy(batch['y'], g)], axis=1)
        return tf.tensor_scatter_nd_update(table, batch['index'][:, None], ce), count + 1

      table, count = dataset.reduce((tf.zeros_like(previous), tf.constant(0, tf.int64)),
                                    collect)
      w = tf.stack([dividemix_tf.clean_probability(table[:, 0]),
                    dividemix_tf.clean_probability(table[:, 1])], axis=1)
      return w, count

    w, batches = tf.cond(ctx.hparams[ACTIVE] > 0, divide,
                         lambda: (previous, tf.constant(1, tf.int64)))
    ctx[_W], ctx[_BATCHES] = w, tf.maximum(batches, 1)
    ctx.state[CLEAN_PROBABILITY] = w

  def batch(self, batch, ctx):
    seed = tf.random.experimental.stateless_fold_in(
        tf.stack([ctx.hparams[contract.MIX_SEED], tf.cast(batch[contract.MIX_KEY][0], tf.int32)]),
        tf.cast(ctx.step, tf.int32))
    lam, permutation = dividemix_tf.draw(seed, tf.shape(batch['y'])[0], self.alpha)
    lam = tf.where(ctx.hparams[ACTIVE] > 0, lam, 1.0)
    ctx[_MIX] = (lam, permutation)
    doubled = {name: tf.concat([value, value], axis=0) for name, value in batch.items()}
    doubled['x'] = tf.concat([batch['x'], mixup_tf.mix(batch['x'], lam, permutation)], axis=0)
    return doubled

  def loss(self, batch, out, ctx):
    half = tf.shape(batch['y'])[0] // 2
    labels, index = batch['y'][:half], batch['index'][:half]
    f, g = self._split(out.features[:half])
    f_mixed, g_mixed = self._split(out.features[half:])
    warm = losses_tf.cross_entropy(labels, f) + losses_tf.cross_entropy(labels, g)
    lam, permutation = ctx[_MIX]
    w = tf.gather(ctx[_W], index)
    guess = dividemix_tf.co_guess(f[None], g[None], self.temperature)
    step_in_epoch = tf.math.floormod(tf.cast(ctx.step, tf.int64), ctx[_BATCHES])
    progress = ctx.hparams[ROUND] + tf.cast(step_in_epoch, tf.float32) / tf.cast(
        ctx[_BATCHES], tf.float32)
    lambda_u = dividemix_tf.lambda_u_weight(progress, self.warmup_rounds, self.lambda_u)

    def network_loss(own, own_mixed, w_other):
      labelled = w_other > self.threshold
      refined = dividemix_tf.refine_labels(labels, w_other, own[None], self.temperature)
      targets = tf.where(labelled[:, None], refined, guess)
      return dividemix_tf.masked_per_example_loss(
          own_mixed, mixup_tf.mix(targets, lam, permutation), labelled, lambda_u,
          self.lambda_r)

    semi = network_loss(f, f_mixed, w[:, 1]) + network_loss(g, g_mixed, w[:, 0])
    active = ctx.hparams[ACTIVE] > 0
    zeros = tf.zeros_like(warm)
    return tf.concat([tf.where(active, zeros, 2.0 * warm),
                      tf.where(active, 2.0 * semi, zeros)], axis=0)
