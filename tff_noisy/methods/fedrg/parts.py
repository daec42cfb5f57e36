"""FedRG's client part (the code's ``warm_train`` and ``finetune_train_VMF_ori``), on the
maths of ``ops.fedrg_tf``.

Each step's batch of B examples becomes one of 2B (``batch``): x, then its second view
(``fedlsr_tf.second_view``, drawn statelessly from the round's ``fedrg_seed``, the
client's key and the step), every other field repeated, ``aggregation_weight`` 1 on the
first half and 0 on the second. One forward pass gives the features of both halves.

- Stage I (``fedrg_stage`` 0): SimCLR's InfoNCE on the projections of the 2B rows (one
  loss per row: their mean is the code's).
- Stage II (``fedrg_stage`` 1): the geometry model splits the first half into clean and
  noisy examples and the loss is FedRG's (``fedrg_tf.fedrg_loss``) on the first half, times
  2, and 0 on the second half; after the optimiser's step the mixture takes the batch's
  statistics and T is projected on the simplex (``after_step``; Stage I leaves the state
  as it is, as the code builds its mixture at its first Stage II step).

The client's state ``fedrg_state`` (``layout``: T, the mixture, the median) is its own:
the model's carrier vector is a global weight, so ``start`` keeps the offset o = state −
received carrier and every step reads the state as carrier + o; the step's gradient
reaches T through the carrier, coupled weight decay is taken off it (the code's T has
none), and ``finish`` keeps carrier + o and puts the received carrier back, so the update
carries no change of it (the server learns neither T nor the mixture, and the global
carrier stays at its initial zeros). ``fedrg_selection`` [n, 2] holds each
example's latest (clean flag, P_clean), −1 before its first Stage II step.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods.contract import ClientPart, MIX_KEY, Needs
from tff_noisy.methods.two_views import doubled_batch
from tff_noisy.methods.fedrg.layout import Layout
from tff_noisy.ops import fedlsr_tf
from tff_noisy.ops import fedrg_tf

STAGE = 'fedrg_stage'
SEED = 'fedrg_seed'
STATE = 'fedrg_state'
SELECTION = 'fedrg_selection'
_OFFSET, _NEW, _ROWS = 'fedrg_offset', 'fedrg_new_state', 'fedrg_rows'


def view_seed(round_seed, client_key, step):
  """The second view's stateless seed (int32 [2]) of one step."""
  return tf.random.experimental.stateless_fold_in(
      tf.stack([tf.cast(round_seed, tf.int32), tf.cast(client_key, tf.int32)]),
      tf.cast(step, tf.int32))


def pack(layout: Layout, pieces: dict):
  """``layout.pack`` of tensors."""
  return tf.concat([tf.reshape(tf.cast(pieces[name], tf.float32), [-1])
                    for name in layout.slices], axis=0)


class FedRGLoss(ClientPart):
  """Stage I's InfoNCE or Stage II's geometry-split loss (module doc)."""

  needs = Needs(features=True, rows=SELECTION)  # Not stackable: per-client state, GMM.
  hparams = {STAGE: np.float32(0.0), SEED: np.int32(0)}

  def __init__(self, layout: Layout, carrier_index: int, projector_dim: int, params,
               weight_decay: float, seed: int):
    self.layout = layout
    self.carrier_index = int(carrier_index)
    self.dim = layout.dim
    self.projector_dim = int(projector_dim)
    self.params = params
    self.weight_decay = float(weight_decay)
    self.seed = int(seed)
    self.state_spec = {STATE: tf.TensorSpec([layout.size], tf.float32),
                       SELECTION: tf.TensorSpec([None, 2], tf.float32)}

  def initial_state(self, labels):
    return {STATE: self.layout.initial(labels, self.seed),
            SELECTION: -np.ones((len(labels), 2), np.float32)}

  def start(self, ctx):
    ctx[_OFFSET] = ctx.state[STATE] - tf.convert_to_tensor(
        ctx.initial_trainable[self.carrier_index])

  def batch(self, batch, ctx):
    if batch['x'].shape.rank != 4:
      raise ValueError(f"FedRG's second view needs images [B, H, W, channels], got inputs "
                       f"of shape {batch['x'].shape}")
    seed = view_seed(ctx.hparams[SEED], batch[MIX_KEY][0], ctx.step)
    return doubled_batch(batch, fedlsr_tf.second_view(batch['x'], seed))

  def _stage_two(self, batch, out, state, half):
    p = self.params
    layout = self.layout
    pieces = layout.unpack(state, tf.reshape)
    frozen = {k: tf.stop_gradient(v) for k, v in pieces.items()}
    labels = batch['y'][:half]
    z = tf.stop_gradient(fedrg_tf.l2_normalize(out.features[:, :self.dim]))
    z1, z2 = z[:half], z[half:]
    kappa_hat = fedrg_tf.augmentation_concentration(z1, z2)
    median = fedrg_tf.update_median(frozen['median'], frozen['median_set'], kappa_hat)
    ratio = fedrg_tf.precision_ratio(kappa_hat, median)
    gamma_bg, gamma = fedrg_tf.geometry_posterior(z1, frozen['mu'], frozen['kappa'],
                                                  frozen['beta'], frozen['pi0'], ratio)
    p_clean = fedrg_tf.clean_posterior(gamma, gamma_bg, frozen['m'], labels)
    noisy, _ = fedrg_tf.noisy_split(p_clean, p.gmm_threshold)
    loss = fedrg_tf.fedrg_loss(labels, out.logits[:half], pieces['t'], noisy,
                               p.clean_weight, p.noise_weight, p.sce_alpha, p.sce_beta)
    mixture = fedrg_tf.update_mixture(
        {k: frozen[k] for k in ('mu', 'kappa', 'beta', 'pi0', 'm')}, z1, gamma, gamma_bg,
        labels, 1.0 - noisy, p.dp_alpha, p.dirichlet_smooth, p.proto_momentum)
    new_state = pack(layout, dict(mixture, t=frozen['t'], median=median,
                                  median_set=tf.constant(1.0)))
    rows = tf.stack([1.0 - noisy, p_clean], axis=1)
    return tf.concat([2.0 * loss, tf.zeros_like(loss)], axis=0), new_state, rows

  def loss(self, batch, out, ctx):
    half = tf.shape(batch['y'])[0] // 2
    start = self.dim + self.projector_dim
    state = out.features[0, start:] + ctx[_OFFSET]  # The client's own state (module doc).

    def stage_one():
      per_row = fedrg_tf.info_nce(out.features[:, self.dim:start], self.params.temperature)
      return per_row, tf.stop_gradient(state), tf.cast(out.rows, tf.float32)

    per_example, new_state, rows = tf.cond(
        ctx.hparams[STAGE] > 0.5, lambda: self._stage_two(batch, out, state, half),
        stage_one)
    ctx[_NEW], ctx[_ROWS] = new_state, rows
    return per_example

  def step(self, grads, weights, ctx):
    if self.weight_decay:
      i = self.carrier_index
      grads = list(grads)
      grads[i] = grads[i] - self.weight_decay * weights[i]
    return grads

  def after_step(self, weights, ctx):
    i, layout = self.carrier_index, self.layout
    weights = list(weights)
    offset = ctx[_OFFSET]
    a, b = layout.slices['t']
    c = layout.num_classes
    stepped_t = tf.reshape((weights[i] + offset)[a:b], [c, c])  # T after the optimiser.
    projected = tf.reshape(tf.where(ctx.hparams[STAGE] > 0.5,
                                    fedrg_tf.project_transition(stepped_t), stepped_t), [-1])
    new_state = tf.concat([ctx[_NEW][:a], projected, ctx[_NEW][b:]], axis=0)
    weights[i] = new_state - offset
    ctx.rows = tf.concat([ctx[_ROWS], ctx[_ROWS]], axis=0)  # Both halves' indices.
    return weights

  def finish(self, ctx):
    carrier = ctx.trained.trainable[self.carrier_index]
    ctx.state[STATE] = tf.convert_to_tensor(carrier) + ctx[_OFFSET]
    carrier.assign(ctx.initial_trainable[self.carrier_index])  # It sends no change.
