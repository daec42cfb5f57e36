"""FedRG (Wen et al. 2026, its released code) as a method: the client model (the head on
the encoder's features, the projector and the carrier as its features), the state's
layout, one Stage II step on a toy image model replayed in NumPy (the split, the
mixture's update, T's step through the carrier without weight decay and its projection,
the client's own state read through the offset from the received carrier), one Stage I
step (InfoNCE, the state untouched), flat inputs and bad parameters refused, and a digits
run through the driver (tf; equal on tff, slow)."""
import types

import helpers
import numpy as np
import pytest
import tensorflow as tf

import models
from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.federated.client_parts.mixup import MIX_KEY
from tff_noisy.methods.fedrg import algorithm
from tff_noisy.methods.fedrg import parts
from tff_noisy.methods.fedrg.layout import Layout
from tff_noisy.methods.fedrg.model import carrier_index, fedrg_model
from tff_noisy.ops import dividemix
from tff_noisy.ops import fedlsr_tf
from tff_noisy.ops import fedrg
from tff_noisy.ops import fedrg_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_RNG = np.random.default_rng(0)
_CLASSES, _COMPONENTS, _SIDE, _PROJ, _LR = 3, 2, 4, 5, 0.5
_DIM = _SIDE * _SIDE  # The toy encoder is a Flatten: h = x.


def _base():
  return tf.keras.Sequential([tf.keras.layers.Input((_SIDE, _SIDE, 1)),
                              tf.keras.layers.Flatten(),
                              tf.keras.layers.Dense(_CLASSES, name='logits')])


def _layout():
  return Layout(_CLASSES, _COMPONENTS, _DIM)


def _model():
  return fedrg_model(_base, _layout().size, 7, _PROJ)()


def test_the_layout_packs_and_unpacks_every_piece():
  layout = _layout()
  # T 3·3 + μ 2·16 + κ 2 + β 2 + π₀ + M 3·2 + median + flag = 54.
  assert layout.size == 9 + 32 + 2 + 2 + 1 + 6 + 1 + 1
  start = layout.unpack(layout.initial(np.array([0, 1, 2]), seed=4))
  np.testing.assert_array_equal(start['t'], np.eye(3))
  np.testing.assert_allclose(np.linalg.norm(start['mu'], axis=1), 1.0, rtol=1e-6)
  assert start['median_set'] == 0 and start['pi0'] == np.float32(0.05)
  again = layout.unpack(layout.initial(np.array([0, 1, 2]), seed=4))
  other = layout.unpack(layout.initial(np.array([0, 1, 1]), seed=4))
  np.testing.assert_array_equal(start['mu'], again['mu'])  # Deterministic per client,
  assert np.abs(start['mu'] - other['mu']).max() > 0.01  # drawn for each client.


def test_the_model_outputs_the_head_and_gives_h_projection_and_carrier_as_features():
  model = _model()
  x = _RNG.uniform(size=(2, _SIDE, _SIDE, 1)).astype(np.float32)
  index = carrier_index(model)
  model.trainable_variables[index].assign(np.arange(_layout().size, dtype=np.float32))
  features, logits = models.features_and_logits(model)(x, training=False)
  assert features.shape == (2, _DIM + _PROJ + _layout().size)
  np.testing.assert_allclose(features[:, :_DIM], x.reshape(2, -1), rtol=1e-6)
  np.testing.assert_array_equal(features[:, _DIM + _PROJ:], np.tile(np.arange(54.0), (2, 1)))
  head = model.get_layer(models.LOGITS_LAYER).dense
  np.testing.assert_allclose(logits, x.reshape(2, -1) @ head.kernel.numpy() + head.bias.numpy(),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(model(x), logits, rtol=1e-6)


def _program(stage_params, weight_decay):
  model = _model()
  part = parts.FedRGLoss(_layout(), carrier_index(model), _PROJ, stage_params,
                         weight_decay, seed=0)
  program = ClientProgram([part])
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           program, local_epochs=1, weight_decay=weight_decay)
  return model, part, program, train


def _state(layout):
  """A client state part-way through Stage II: T off the identity, a running median."""
  pieces = layout.unpack(layout.initial(np.arange(6) % 3, seed=1).astype(np.float64))
  pieces['t'] = fedrg.project_transition(np.eye(3) + 0.2)
  pieces['kappa'] = np.array([4.0, 7.0])
  pieces['median'], pieces['median_set'] = 3.0, 1.0
  return layout.pack(pieces)


def test_one_stage_two_step_by_the_numpy_maths():
  """One batch of 6, one SGD step with weight decay 0.1. The received carrier is random:
  the step reads the client's own state (state − received + carrier). The NumPy replay:
  x' the second view of the step's seed; z₁, z₂ the unit features of x, x' (h = x here);
  m, r, γ, P_clean, the GMM split and the mixture's update of ``ops.fedrg``; T after the
  step is the projection of T − lr ∂(mean ℓ)/∂T (no decay on T)."""
  params = methods.resolve_params('fedrg', {}, rounds=10)
  model, part, program, train = _program(params, weight_decay=0.1)
  layout = _layout()
  x = _RNG.uniform(size=(6, _SIDE, _SIDE, 1)).astype(np.float32)
  y = np.array([0, 1, 2, 0, 1, 1])
  key, seed = 2, 5
  index = carrier_index(model)
  received = [v.numpy() for v in model.trainable_variables]
  received[index] = _RNG.normal(size=layout.size).astype(np.float32)
  initial = client_work.model_weights_of_values([tf.constant(w) for w in received],
                                                [v.numpy() for v in model.non_trainable_variables])
  state = {parts.STATE: tf.constant(_state(layout)),
           parts.SELECTION: tf.constant(-np.ones((6, 2), np.float32))}
  hparams = {parts.STAGE: tf.constant(1.0), parts.SEED: tf.constant(seed)}
  dataset = helpers.client_dataset(x, y, **{MIX_KEY: np.full(6, key, np.int32)})
  result, metrics, kept = train(initial, dataset, state, hparams)

  x2 = fedlsr_tf.second_view(tf.constant(x), parts.view_seed(seed, key, 0)).numpy()
  assert np.abs(x2 - x).max() > 0.1
  own = layout.unpack(_state(layout).astype(np.float64))
  z1, z2 = fedrg.l2_normalize(x.reshape(6, -1)), fedrg.l2_normalize(x2.reshape(6, -1))
  kappa_hat = fedrg.augmentation_concentration(z1, z2)
  median = fedrg.update_median(own['median'], True, kappa_hat)
  ratio = fedrg.precision_ratio(kappa_hat, median)
  bg, gamma = fedrg.geometry_posterior(z1, own['mu'], own['kappa'], own['beta'], own['pi0'],
                                       ratio)
  p_clean = fedrg.clean_posterior(gamma, bg, own['m'], y)
  clean_probability = dividemix.clean_probability_em(1 - p_clean, max_iter=100, tol=1e-3,
                                                     reg_covar=1e-6)
  noisy = (clean_probability < 0.5).astype(np.float64)
  assert 0 < noisy.sum() < 6  # The split has both sides.
  mixture = fedrg.update_mixture({k: own[k] for k in ('mu', 'kappa', 'beta', 'pi0', 'm')},
                                 z1, gamma, bg, y, 1 - noisy)
  got = layout.unpack(np.asarray(kept[parts.STATE], np.float64))
  for name in ('mu', 'kappa', 'beta', 'pi0', 'm'):
    np.testing.assert_allclose(got[name], mixture[name], rtol=1e-4, atol=1e-5, err_msg=name)
  assert got['median'] == pytest.approx(median, rel=1e-5) and got['median_set'] == 1
  np.testing.assert_allclose(kept[parts.SELECTION], np.stack([1 - noisy, p_clean], 1),
                             rtol=1e-4, atol=1e-6)
  # T: the gradient of the step's mean loss with the received head, then the projection.
  head_kernel, head_bias = (received[i] for i, v in enumerate(model.trainable_variables)
                            if 'logits' in v.name)
  t = tf.Variable(own['t'], dtype=tf.float32)
  with tf.GradientTape() as tape:
    logits = tf.constant(x.reshape(6, -1) @ head_kernel + head_bias)
    loss = tf.reduce_mean(fedrg_tf.fedrg_loss(y, logits, t, noisy.astype(np.float32)))
  want_t = fedrg.project_transition(own['t'] - _LR * tape.gradient(loss, t).numpy())
  assert np.abs(want_t - own['t']).max() > 1e-3  # T moved.
  np.testing.assert_allclose(got['t'], want_t, rtol=1e-4, atol=1e-6)
  assert float(metrics['loss_sum']) / 12 == pytest.approx(float(loss), rel=1e-4)
  assert float(result.update_weight) == 6.0
  # The received carrier is put back: the update carries no change of the client's state.
  assert float(np.abs(result.update.trainable[index]).max()) == 0
  assert float(np.abs(result.update.trainable[0]).max()) > 0  # The projector did move.


def test_one_stage_one_step_is_infonce_and_keeps_the_state():
  params = methods.resolve_params('fedrg', {'temperature': 0.5}, rounds=10)
  model, part, program, train = _program(params, weight_decay=0.0)
  x = _RNG.uniform(size=(4, _SIDE, _SIDE, 1)).astype(np.float32)
  y = np.array([0, 1, 2, 0])
  initial = client_work.model_weights_of(model)
  start = _state(_layout())
  state = {parts.STATE: tf.constant(start),
           parts.SELECTION: tf.constant(-np.ones((4, 2), np.float32))}
  hparams = {parts.STAGE: tf.constant(0.0), parts.SEED: tf.constant(3)}
  x2 = fedlsr_tf.second_view(tf.constant(x), parts.view_seed(3, 0, 0)).numpy()
  features, _ = models.features_and_logits(model)(np.concatenate([x, x2]), training=True)
  want = fedrg.info_nce(features.numpy()[:, _DIM:_DIM + _PROJ], 0.5).mean()
  dataset = helpers.client_dataset(x, y, **{MIX_KEY: np.zeros(4, np.int32)})
  result, metrics, kept = train(initial, dataset, state, hparams)
  assert float(metrics['loss_sum']) / int(metrics['num_examples']) == pytest.approx(want,
                                                                                    rel=1e-4)
  np.testing.assert_allclose(kept[parts.STATE], start, atol=1e-6)
  np.testing.assert_array_equal(kept[parts.SELECTION], -np.ones((4, 2)))
  head = [i for i, v in enumerate(model.trainable_variables) if 'logits' in v.name]
  assert all(float(np.abs(result.update.trainable[i]).max()) == 0 for i in head)


def test_flat_inputs_are_refused_when_the_run_is_assembled():
  with pytest.raises(ConfigError, match=r"fedrg's second view needs image inputs .* \(64,\)"):
    algorithm.image_fields(types.SimpleNamespace(input_shape=(64,)))
  assert algorithm.image_fields(types.SimpleNamespace(input_shape=(8, 8, 1))) == {
      MIX_KEY: (np.int32, ())}


def test_stage_two_starts_after_the_warmup_rounds():
  params = methods.resolve_params('fedrg', {}, rounds=500)
  assert params.warmup(500) == 150 and params.components(10) == 10
  assert [algorithm.stage_two(r, 2) for r in (1, 2, 3)] == [False, False, True]


@pytest.mark.parametrize('params, match', [
    ({'warmup_rounds': 10}, r'^method.params.warmup_rounds: needs a number of rounds in '
                            r'\[0, fl.rounds=10\) \(or null\), got 10$'),
    ({'clusters': 0}, r'^method.params.clusters: needs an integer >= 1 \(or null\), got 0$'),
    ({'gmm_threshold': 1.0}, r'^method.params.gmm_threshold: needs a number in \(0, 1\), '
                             r'got 1.0$'),
    ({'proto_momentum': 0.0}, r'^method.params.proto_momentum: needs a number in \(0, 1\], '
                              r'got 0.0$'),
    ({'temperature': 0}, r'^method.params.temperature: needs a number > 0, got 0$'),
    ({'clean_weight': -1.0}, r'^method.params.clean_weight: needs a number >= 0, got -1.0$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('fedrg', params, rounds=10)


def _digits(runtime='tf'):
  return helpers.small_digits_config(
      'fedrg', runtime, dict(warmup_rounds=1, projector_hidden=16, projector_dim=8), rounds=3)


def test_a_digits_run_pretrains_then_splits_and_is_not_fedavg(tmp_cache):
  del tmp_cache
  simulation = helpers.run_rounds(_digits())
  history = simulation.history
  assert [r[parts.STAGE] for r in history] == [0, 1, 1]
  assert parts.SELECTION not in history[0]
  record = history[-1][parts.SELECTION]
  assert record['split'] > 0 and 0 <= record['precision'] <= 1 and 0 <= record['recall'] <= 1
  assert record['transition_error'] is not None
  assert all(np.isfinite(r['train_loss']) for r in history)
  layout = simulation.method.recipe.server[0].layout
  moved = []
  for cid in simulation.data.client_ids:
    kept = simulation.store.objective_state(cid, simulation.process.program,
                                            simulation.data.y[cid])
    pieces = layout.unpack(np.asarray(kept[parts.STATE], np.float64))
    if pieces['median_set']:
      moved.append(np.abs(pieces['t'] - np.eye(layout.num_classes)).max())
  assert moved and max(moved) > 1e-4  # The clients' own T left the identity.
  carriers = [w for w in simulation.final_weights() if np.shape(w) == (layout.size,)]
  assert len(carriers) == 1 and not np.any(carriers[0])  # The global carrier stays zero.
  fedavg = helpers.run_rounds(helpers.small_digits_config('fedavg', rounds=3))
  # Round 1 is SimCLR, not cross-entropy; the evaluated models differ.
  assert abs(history[0]['train_loss'] - fedavg.history[0]['train_loss']) > 0.1
  assert [r['test_accuracy'] for r in history] != [r['test_accuracy'] for r in fedavg.history]


@pytest.mark.slow
def test_fedrg_runs_equally_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  for want, got in zip(runs['tff'].history, runs['tf'].history):
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-5)
    if parts.SELECTION in want:
      assert got[parts.SELECTION]['selected'] == want[parts.SELECTION]['selected']
  for cid in runs['tff'].data.client_ids:  # The clients' own states too.
    states = [r.store.objective_state(cid, r.process.program, r.data.y[cid])[parts.STATE]
              for r in (runs['tff'], runs['tf'])]
    np.testing.assert_allclose(states[1], states[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_resumed_run_equals_the_uninterrupted_one(tmp_path, tmp_cache):
  """The clients' T and mixtures are checkpointed client state and the views come from the
  round's seed: a run restarted after rounds 1 and 2 trains exactly as the uninterrupted
  one."""
  del tmp_cache
  reference = helpers.run_with_restarts(_digits(), str(tmp_path / 'reference'))
  resumed = helpers.run_with_restarts(_digits(), str(tmp_path / 'resumed'),
                                      restart_after=(1, 2))
  for want, got in zip(reference.history, resumed.history):
    for key in ('train_loss', 'test_accuracy', parts.STAGE):
      assert got[key] == want[key], key
  assert helpers.max_difference(reference.final_weights(), resumed.final_weights()) == 0
