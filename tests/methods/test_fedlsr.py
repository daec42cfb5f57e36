"""FedLSR (Jiang et al. 2022) as a method: the doubled batch, one client step on a toy
image model against ``ops.fedlsr``'s NumPy loss (the two views' logits from one forward
pass, the second view and λ drawn from the step's seeds, the update weight the number of
examples), flat inputs refused, the parameters' errors, and a digits run through the
driver with γ(t)'s ramp (tf; equal on tff, slow)."""
import types

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.federated.client_parts.mixup import MIX_KEY
from tff_noisy.methods.fedlsr import algorithm
from tff_noisy.methods.fedlsr import parts
from tff_noisy.ops import fedlsr
from tff_noisy.ops import fedlsr_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_RNG = np.random.default_rng(0)
_CLASSES, _LR = 3, 0.5


def test_the_doubled_batch_repeats_every_field_and_weighs_the_first_half():
  batch = {'x': tf.constant([[1.0], [2.0]]), 'y': tf.constant([0, 2], tf.int64),
           'index': tf.constant([5, 7], tf.int64)}
  doubled = parts.doubled_batch(batch, tf.constant([[-1.0], [-2.0]]))
  np.testing.assert_array_equal(doubled['x'].numpy()[:, 0], [1, 2, -1, -2])
  np.testing.assert_array_equal(doubled['y'], [0, 2, 0, 2])
  np.testing.assert_array_equal(doubled['index'], [5, 7, 5, 7])
  np.testing.assert_array_equal(doubled['aggregation_weight'], [1, 1, 0, 0])
  weighted = parts.doubled_batch(dict(batch, aggregation_weight=tf.constant([0.5, 2.0])),
                                 batch['x'])
  np.testing.assert_array_equal(weighted['aggregation_weight'], [0.5, 2, 0, 0])


def _image_model():
  return tf.keras.Sequential([tf.keras.layers.Input((5, 5, 1)), tf.keras.layers.Flatten(),
                              tf.keras.layers.Dense(_CLASSES, name='logits')])


@pytest.mark.parametrize('variant', ['code', 'plain'])
def test_one_step_by_the_numpy_loss(variant):
  """One batch of 6, one SGD step at weights w: the two halves' logits are the model's on
  x and on x' = second_view(x, the step's view seed); the update is lr ∇ mean ℓ with ℓ
  FedLSR's loss at λ = draw_mix(the step's mix seed); the update weight is 6, the loss
  metric the mean ℓ."""
  x = _RNG.uniform(size=(6, 5, 5, 1)).astype(np.float32)
  y = np.array([0, 1, 2, 0, 1, 1])
  gamma, gamma_e, seed, key = 0.4, 0.3, 12, 2  # Seed 12: a rotation by 19°.
  model = _image_model()
  received = [v.numpy() for v in model.trainable_variables]
  program = ClientProgram([parts.SelfRegularisation(gamma_e, variant=variant)])
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           program, local_epochs=1)
  initial = client_work.model_weights_of_values([tf.constant(w) for w in received], [])
  hparams = {parts.DISTILL_WEIGHT: tf.constant(gamma), parts.SEED: tf.constant(seed)}
  dataset = helpers.client_dataset(x, y, **{MIX_KEY: np.full(6, key, np.int32)})
  result, metrics, _ = train(initial, dataset, {}, hparams)
  view_seed, mix_seed = parts.step_seeds(seed, key, 0)
  x2 = fedlsr_tf.second_view(tf.constant(x), view_seed).numpy()
  assert np.abs(x2 - x).max() > 0.1  # The second view differs.
  mix = float(fedlsr_tf.draw_mix(mix_seed))
  assert 0 < mix < 1

  def logits(w, images):
    return images.reshape(len(images), -1) @ w[0] + w[1]

  want = fedlsr.fedlsr_loss(logits(received, x), logits(received, x2), y, mix, gamma, gamma_e,
                            variant=variant)
  assert float(metrics['loss_sum']) / int(metrics['num_examples']) == pytest.approx(
      want.mean(), rel=1e-5)
  assert int(metrics['num_examples']) == 12  # Both views counted (a documented deviation).
  assert float(result.update_weight) == 6.0
  weights = [tf.Variable(w) for w in received]
  with tf.GradientTape() as tape:
    flat = [tf.reshape(tf.constant(v), [6, -1]) for v in (x, x2)]
    z1, z2 = (f @ weights[0] + weights[1] for f in flat)
    loss = tf.reduce_mean(fedlsr_tf.fedlsr_loss(y, z1, z2, mix, gamma, gamma_e,
                                                variant=variant))
  assert float(loss) == pytest.approx(want.mean(), rel=1e-5)
  for update, gradient in zip(result.update.trainable, tape.gradient(loss, weights)):
    np.testing.assert_allclose(update.numpy(), _LR * gradient.numpy(), rtol=1e-4, atol=1e-6)


def test_flat_inputs_have_no_second_view():
  x, y = helpers.random_client(0, 4)
  model = helpers.linear_model()
  program = ClientProgram([parts.SelfRegularisation(0.3)])
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           program, local_epochs=1)
  initial = client_work.model_weights_of(model)
  with pytest.raises(ValueError, match=r"second view needs images \[B, H, W, channels\]"):
    train(initial, helpers.client_dataset(x, y, **{MIX_KEY: np.zeros(4, np.int32)}), {},
          {parts.DISTILL_WEIGHT: tf.constant(0.0), parts.SEED: tf.constant(0)})


def test_flat_inputs_are_refused_when_the_run_is_assembled():
  """Before any work: the data's inputs fix the element spec the recipe's fields check."""
  data = types.SimpleNamespace(input_shape=(64,))
  with pytest.raises(ConfigError, match=r"fedlsr's second view needs image inputs .* shape \(64,\)"):
    algorithm.image_fields(data)
  assert algorithm.image_fields(types.SimpleNamespace(input_shape=(8, 8, 1))) == {
      MIX_KEY: (np.int32, ())}


@pytest.mark.parametrize('params, match', [
    ({'gamma': -1.0}, r'^method.params.gamma: needs a number >= 0, got -1.0$'),
    ({'gamma_e': -0.3}, r'^method.params.gamma_e: needs a number >= 0, got -0.3$'),
    ({'warmup_ratio': 1.5}, r'^method.params.warmup_ratio: needs a share in \[0, 1\], got 1.5$'),
    ({'distill_t': 0}, r'^method.params.distill_t: needs a number > 0, got 0$'),
    ({'variant': 'torch'}, r"^method.params.variant: needs 'code' or 'plain', got 'torch'$"),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('fedlsr', params, rounds=10)


def _digits(runtime='tf'):
  return helpers.small_digits_config('fedlsr', runtime, dict(warmup_ratio=0.5), rounds=4)


def test_a_digits_run_ramps_gamma_and_is_not_fedavg(tmp_cache):
  del tmp_cache
  simulation = helpers.run_rounds(_digits())
  # t_w = 0.5 · 4 = 2: γ(r) = 0.4 (r − 1) / 2 for r − 1 < 2.
  assert [r[parts.DISTILL_WEIGHT] for r in simulation.history] == pytest.approx(
      [0.0, 0.2, 0.4, 0.4])
  assert all(np.isfinite(r['train_loss']) for r in simulation.history)
  fedavg = helpers.run_rounds(helpers.small_digits_config('fedavg', rounds=4))
  assert helpers.max_difference(simulation.final_weights(), fedavg.final_weights()) > 1e-3


@pytest.mark.slow
def test_fedlsr_runs_equally_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  for want, got in zip(runs['tff'].history, runs['tf'].history):
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-5)


@pytest.mark.slow
def test_a_resumed_run_equals_the_uninterrupted_one(tmp_path, tmp_cache):
  """The views and λ are drawn from the round's seed and the client's key: a run
  restarted after rounds 1 and 2 trains exactly as the uninterrupted one."""
  del tmp_cache
  reference = helpers.run_with_restarts(_digits(), str(tmp_path / 'reference'))
  resumed = helpers.run_with_restarts(_digits(), str(tmp_path / 'resumed'),
                                      restart_after=(1, 2))
  for want, got in zip(reference.history, resumed.history):
    for key in ('train_loss', 'test_accuracy', parts.DISTILL_WEIGHT):
      assert got[key] == want[key], key
  assert helpers.max_difference(reference.final_weights(), resumed.final_weights()) == 0
