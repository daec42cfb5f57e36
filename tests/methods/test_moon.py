"""MOON (Li, He & Song 2021): the model-contrastive term (NumPy and TF twins, a
hand-computed case), the client kernel's frozen global and previous models, the
parameters, and digits runs (equal on tff and tf, not FedAvg, under FedDS)."""
import collections

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.federated.client_parts import GlobalAndPreviousModels
from tff_noisy.methods.moon.parts import ModelContrast
from tff_noisy.ops import losses
from tff_noisy.ops import moon
from tff_noisy.ops import moon_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_RNG = np.random.default_rng(0)


def test_the_tf_twin_equals_numpy():
  z, z_glob, z_prev = (_RNG.normal(size=(6, 5)) for _ in range(3))
  z_prev[0] = 0.0  # A zero representation: similarity 0.
  want = moon.model_contrastive_loss(z, z_glob, z_prev, 0.5)
  got = moon_tf.model_contrastive_loss(*(tf.constant(a, tf.float32) for a in (z, z_glob, z_prev)),
                                       0.5)
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_a_hand_computed_case():
  """z = (1, 0), z_glob = (1, 1): sim 1/sqrt 2; z_prev = (0, 2): sim 0; T = 0.5:
  l_con = -log(e^{sqrt 2} / (e^{sqrt 2} + e^0)) = log(1 + e^{-sqrt 2})."""
  loss = moon.model_contrastive_loss([[1.0, 0.0]], [[1.0, 1.0]], [[0.0, 2.0]], 0.5)
  np.testing.assert_allclose(loss, [np.log1p(np.exp(-np.sqrt(2)))])
  # z_prev = z_glob: log 2 whatever z.
  np.testing.assert_allclose(moon.model_contrastive_loss([[3.0, -1.0]], [[1.0, 2.0]],
                                                         [[1.0, 2.0]], 0.5), [np.log(2)])


def _mlp():
  return tf.keras.Sequential([tf.keras.layers.Input((4,)),
                              tf.keras.layers.Dense(6, activation='relu'),
                              tf.keras.layers.Dense(3, name='logits')])


def test_one_step_trains_on_ce_plus_mu_l_con_against_the_frozen_models():
  """The kernel's first step from the received weights x on one batch, with a previous
  local model p: the update is lr · ∇(CE + mu · l_con(z_x, z_x, z_p)) at x; the new state
  is the trained model and has_previous = 1."""
  lr, mu, temperature = 0.1, 2.0, 0.5
  model = _mlp()
  weights = client_work.model_weights_of(model)
  specs = [tf.TensorSpec(v.shape, v.dtype) for v in tf.nest.flatten(weights)]
  frozen = GlobalAndPreviousModels(specs)
  program = ClientProgram([CrossEntropy(), frozen, ModelContrast(mu, temperature)])
  x, labels = helpers.random_client(2, 8)
  received = [v.numpy() for v in tf.nest.flatten(weights)]
  previous = [w + _RNG.normal(scale=0.5, size=w.shape).astype(np.float32) for w in received]
  state = collections.OrderedDict(zip(frozen.names, previous), has_previous=np.int32(1))

  def features(values):
    tf.nest.map_structure(lambda v, t: v.assign(t), tf.nest.flatten(weights), values)
    return model.layers[0](x).numpy()

  z_prev = features(previous)
  z_glob = features(received)
  with tf.GradientTape() as tape:
    hidden = model.layers[0](x)
    loss = tf.reduce_mean(losses.cross_entropy(labels, model.layers[1](hidden))
                          + mu * moon_tf.model_contrastive_loss(hidden, z_glob, z_prev,
                                                                temperature))
  gradient = tape.gradient(loss, model.trainable_variables)
  initial = tf.nest.pack_sequence_as(weights, [tf.constant(w) for w in received])
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(lr),
                                           program, local_epochs=1, model_fn=_mlp)
  result, _, new_state = train(initial, helpers.client_dataset(x, labels), state, {})
  for update, g in zip(result.update.trainable, gradient):
    np.testing.assert_allclose(update.numpy(), lr * g.numpy(), rtol=1e-4, atol=1e-6)
  trained = [w - u.numpy() for w, u in zip(received, tf.nest.flatten(result.update))]
  for n, w in zip(frozen.names, trained):
    np.testing.assert_allclose(new_state[n].numpy(), w, rtol=1e-5, atol=1e-6)
  assert int(new_state['has_previous']) == 1


def test_a_client_without_a_previous_model_trains_on_the_cross_entropy():
  model = _mlp()
  weights = client_work.model_weights_of(model)
  specs = [tf.TensorSpec(v.shape, v.dtype) for v in tf.nest.flatten(weights)]
  program = ClientProgram([CrossEntropy(), GlobalAndPreviousModels(specs),
                           ModelContrast(5.0, 0.5)])
  x, labels = helpers.random_client(3, 8)
  received = tf.nest.map_structure(lambda v: tf.constant(v.numpy()), weights)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(losses.cross_entropy(labels, model(x)))
  gradient = tape.gradient(loss, model.trainable_variables)
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(0.1),
                                           program, local_epochs=1, model_fn=_mlp)
  result, _, new_state = train(received, helpers.client_dataset(x, labels),
                               program.initial_state(None), {})
  for update, g in zip(result.update.trainable, gradient):
    np.testing.assert_allclose(update.numpy(), 0.1 * g.numpy(), rtol=1e-4, atol=1e-6)
  assert int(new_state['has_previous']) == 1


@pytest.mark.parametrize('name, params, match', [
    ('moon', {'mu': 0}, r'^method.params.mu: needs a number > 0 \(MOON\), got 0$'),
    ('moon', {'temperature': -1}, r'^method.params.temperature: needs a number > 0, got -1$'),
    ('fedds_moon', {'em': 'remote'}, "^method.params.em: needs 'central' or 'federated'"),
])
def test_bad_parameters_are_one_line_errors(name, params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params(name, params, rounds=10)


def _digits(method, runtime='tf', rounds=2):
  return helpers.small_digits_config(method, runtime, public_fraction=0.1, rounds=rounds,
                                     participation=1.0)


@pytest.mark.slow
def test_moon_runs_equally_on_tff_and_tf_and_is_not_fedavg():
  """Every client takes part in both rounds: round 2 has previous models (round 1 trains on
  the cross-entropy alone, as FedAvg)."""
  runs = {runtime: helpers.run_rounds(_digits('moon', runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  assert [r['train_loss'] for r in runs['tff'].history] == pytest.approx(
      [r['train_loss'] for r in runs['tf'].history], rel=1e-5)
  fedavg = helpers.run_rounds(_digits('fedavg'))
  assert runs['tf'].history[0]['train_loss'] == pytest.approx(
      fedavg.history[0]['train_loss'], rel=1e-5)
  assert runs['tf'].history[1]['train_loss'] > fedavg.history[1]['train_loss']  # + mu l_con.
  assert helpers.max_difference(runs['tf'].final_weights(), fedavg.final_weights()) > 1e-3


@pytest.mark.slow
def test_fedds_weighs_moon_clients():
  fedds = helpers.run_rounds(_digits('fedds_moon'))
  alone = helpers.run_rounds(_digits('moon'))
  assert len(fedds.history[-1]['fedds_weights']) == 4
  assert helpers.max_difference(fedds.final_weights(), alone.final_weights()) > 1e-4
