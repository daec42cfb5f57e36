"""RFL (Yang et al. 2022) as a method: the server's centroid aggregation from the
clients' sums (against ``ops.rfl`` and by hand), one client's round on a toy linear model
(its features are its inputs) against the NumPy maths, the parameters' errors, and a
digits run through the driver (tf; equal on tff, slow)."""
import types

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.rfl import algorithm
from tff_noisy.methods.rfl import parts
from tff_noisy.ops import fedrn
from tff_noisy.ops import rfl
from tff_noisy.ops import rfl_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_RNG = np.random.default_rng(0)
_CLASSES, _WIDTH, _LR = 3, 4, 0.5


def test_the_sums_clients_send_give_the_code_s_aggregation():
  global_centroids = _RNG.normal(size=(_CLASSES, _WIDTH))
  local = _RNG.normal(size=(5, _CLASSES, _WIDTH))
  s = fedrn.cosine_similarity(global_centroids[None], local)  # [K, C], as each client sends.
  got = algorithm.aggregated_centroids(global_centroids, np.einsum('kc,kcd->cd', s, local),
                                       s.sum(0), local.sum(0), 5.0)
  np.testing.assert_allclose(got, rfl.aggregate_centroids(global_centroids, local), rtol=1e-10)


def test_aggregation_by_hand_with_cancelling_similarities_and_no_client():
  # Class 0: f_G = (1, 0), clients (2, 0) (s = 1) and (0, 3) (s = 0): f_G = (2, 0).
  # Class 1: f_G = (0, 1), clients (0, 1) and (0, -1): s = 1, -1 sum to 0, the plain mean
  # (0, 0).
  global_centroids = np.array([[1.0, 0.0], [0.0, 1.0]])
  local = np.array([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 3.0], [0.0, -1.0]]])
  s = np.array([[1.0, 1.0], [0.0, -1.0]])
  got = algorithm.aggregated_centroids(global_centroids, np.einsum('kc,kcd->cd', s, local),
                                       s.sum(0), local.sum(0), 2)
  np.testing.assert_allclose(got, [[2.0, 0.0], [0.0, 0.0]])
  np.testing.assert_array_equal(
      algorithm.aggregated_centroids(global_centroids, 0 * local[0], [0, 0], 0 * local[0], 0),
      global_centroids)


def _hparams(global_centroids, forget_rate, lambda_cen, pseudo, first):
  return {parts.GLOBAL_CENTROIDS: tf.constant(global_centroids, tf.float32),
          parts.FORGET_RATE: tf.constant(forget_rate, tf.float32),
          parts.LAMBDA_CEN: tf.constant(lambda_cen, tf.float32),
          parts.PSEUDO_LABELS: tf.constant(pseudo, tf.int32),
          parts.FIRST_ROUND: tf.constant(first, tf.int32)}


def _one_round(x, y, hparams, lambda_e=0.8, centroid_gradient=False):
  model = helpers.linear_model(_WIDTH, _CLASSES)
  received = [v.numpy() for v in model.trainable_variables]
  part = parts.RFLLoss(_CLASSES, np.zeros((_CLASSES, _WIDTH)), lambda_e=lambda_e,
                       centroid_gradient=centroid_gradient)
  train = client_work.build_local_training(
      model, tff.learning.optimizers.build_sgdm(_LR), ClientProgram([part]), local_epochs=1,
      model_fn=lambda: helpers.linear_model(_WIDTH, _CLASSES))
  initial = client_work.model_weights_of_values([tf.constant(w) for w in received], [])
  result, metrics, _ = train(initial, helpers.client_dataset(x, y), {}, hparams)
  return received, result, metrics


def _numpy_round(x, y, received, global_centroids, forget_rate, lambda_cen, pseudo, first,
                 lambda_e):
  """What the client computes, in NumPy: the features of a linear model are its inputs."""
  logits = x @ received[0] + received[1]
  centroids = rfl.class_means(x, y, _CLASSES) if first else np.asarray(global_centroids)
  selected = rfl.selected_mask(logits, y, forget_rate)
  agree = rfl.agreement_mask(x, y, centroids, selected)
  targets = rfl.training_labels(y, np.argmax(logits, 1), agree, 1 if pseudo else 0, 1)
  return logits, centroids, selected, agree, targets


@pytest.mark.parametrize('first', [1, 0])
def test_one_client_round_by_the_numpy_maths(first):
  """One full batch, one SGD step. The update is lr ∇ mean ℓ at the received weights, ℓ
  RFL's per-example loss with the round's centroids (class means in the first round,
  else f_G) and the received model's pseudo-labels; the client then replays the step's
  centroid update with the trained model and sends f_k, s_k = cos(f_G, f_k) and s_k f_k."""
  x, y = helpers.random_client(4, 12, features=_WIDTH, classes=_CLASSES)
  global_centroids = _RNG.normal(size=(_CLASSES, _WIDTH))
  rate, lambda_cen, lambda_e = 0.25, 0.5, 0.8
  received, result, metrics = _one_round(
      x, y, _hparams(global_centroids, rate, lambda_cen, 1, first), lambda_e)
  logits, centroids, selected, agree, targets = _numpy_round(
      x, y, received, global_centroids, rate, lambda_cen, True, first, lambda_e)
  assert 0 < selected.sum() < len(y) and (targets != y).any()  # The case means something.
  # The gradient of the mean loss: the centroid term is constant in the weights (the
  # code detaches the features, which here are the inputs anyway).
  weights = [tf.Variable(w) for w in received]
  with tf.GradientTape() as tape:
    z = tf.constant(x) @ weights[0] + weights[1]
    loss = tf.reduce_mean(rfl_tf.per_example_loss(
        z, tf.constant(x), y, targets, tf.constant(centroids, tf.float32),
        selected.astype(np.float32), agree.astype(np.float32), lambda_cen, lambda_e))
  want = rfl.rfl_loss(logits, x, y, targets, centroids, selected, agree, lambda_cen, lambda_e)
  assert float(loss) == pytest.approx(want, rel=1e-5)
  for update, gradient in zip(result.update.trainable, tape.gradient(loss, weights)):
    np.testing.assert_allclose(update.numpy(), _LR * gradient.numpy(), rtol=1e-4, atol=1e-6)
  trained = [w - u.numpy() for w, u in zip(received, result.update.trainable)]
  trained_selected = rfl.selected_mask(x @ trained[0] + trained[1], y, rate)
  local = rfl.update_centroids(centroids, rfl.class_means(x, y, _CLASSES, trained_selected))
  similarity = fedrn.cosine_similarity(global_centroids, local)
  sent = metrics['outputs']
  np.testing.assert_allclose(sent[parts.CENTROIDS], local, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(sent[parts.SIMILARITY], similarity, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(sent[parts.WEIGHTED], similarity[:, None] * local, rtol=1e-4,
                             atol=1e-5)
  assert float(sent[parts.CLIENTS]) == 1.0
  agreement = np.mean(np.argmax(logits, 1) == y)
  assert float(metrics['objective'][parts.AGREEMENT]) == pytest.approx(agreement)


def test_before_t_pl_every_example_trains_on_its_label():
  """Pseudo-labels off: the step is the one on RFL's loss with the observed labels."""
  x, y = helpers.random_client(5, 10, features=_WIDTH, classes=_CLASSES)
  global_centroids = _RNG.normal(size=(_CLASSES, _WIDTH))
  received, result, _ = _one_round(x, y, _hparams(global_centroids, 0.0, 0.0, 0, 0), 0.0)
  # τ = 0, λ_e = 0, λ_cen = 0: plain cross-entropy on every example.
  weights = [tf.Variable(w) for w in received]
  with tf.GradientTape() as tape:
    z = tf.constant(x) @ weights[0] + weights[1]
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, z))
  for update, gradient in zip(result.update.trainable, tape.gradient(loss, weights)):
    np.testing.assert_allclose(update.numpy(), _LR * gradient.numpy(), rtol=1e-4, atol=1e-6)


def test_the_recipe_uses_the_model_feature_width_and_a_seeded_draw():
  setup = types.SimpleNamespace(num_classes=10, seed=3, rounds=100,
                                model_fn=lambda: helpers.linear_model(7, 10))
  params = methods.resolve_params('rfl', {}, rounds=100)
  recipe = methods.METHODS['rfl'].resolve()(params, setup)
  centroids = recipe.parts[0].hparams[parts.GLOBAL_CENTROIDS]
  assert centroids.shape == (10, 7) and centroids.dtype == np.float32
  np.testing.assert_array_equal(centroids, algorithm.initial_centroids(10, 7, 3))
  assert not np.array_equal(centroids, algorithm.initial_centroids(10, 7, 4))


@pytest.mark.parametrize('params, match', [
    ({'forget_rate': 1.0}, r'^method.params.forget_rate: needs a number in \[0, 1\), got 1.0$'),
    ({'gradual_rounds': 0}, r'^method.params.gradual_rounds: needs an integer >= 1, got 0$'),
    ({'pseudo_label_round': 0}, r'^method.params.pseudo_label_round: needs an integer >= 1'),
    ({'lambda_cen': -1.0}, r'^method.params.lambda_cen: needs a number >= 0, got -1.0$'),
    ({'lambda_e': -0.1}, r'^method.params.lambda_e: needs a number >= 0, got -0.1$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('rfl', params, rounds=10)


def _digits(runtime='tf'):
  return helpers.small_digits_config('rfl', runtime, dict(gradual_rounds=2,
                                                          pseudo_label_round=1), rounds=3)


def _check_run(simulation):
  history = simulation.history
  assert [r['rfl']['forget_rate'] for r in history] == pytest.approx([0.0, 0.2, 0.2])
  assert [r['rfl']['lambda_cen'] for r in history] == pytest.approx([0.0, 1.0, 1.0])
  assert [r['rfl']['pseudo_labels'] for r in history] == [False, True, True]
  for record in history:
    change = record['rfl_centroid_change']
    assert len(change) == 10 and all(-1 <= c <= 1 for c in change)
    assert 0 < record['objective'][parts.AGREEMENT] <= 1


def test_a_digits_run_moves_the_global_centroids(tmp_cache):
  del tmp_cache
  simulation = helpers.run_rounds(_digits())
  _check_run(simulation)
  # Round 1 starts from the random draw: the centroids the clients send point elsewhere.
  assert min(simulation.history[0]['rfl_centroid_change']) < 0.9
  fedavg = helpers.run_rounds(helpers.small_digits_config('fedavg', rounds=3))
  assert helpers.max_difference(simulation.final_weights(), fedavg.final_weights()) > 1e-3


@pytest.mark.slow
def test_rfl_runs_equally_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  _check_run(runs['tff'])
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  for want, got in zip(runs['tff'].history, runs['tf'].history):
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-5)
    assert got['rfl_centroid_change'] == pytest.approx(want['rfl_centroid_change'], abs=1e-5)


@pytest.mark.slow
def test_a_resumed_run_equals_the_uninterrupted_one(tmp_path, tmp_cache):
  """f_G lives in the server state's hparams: checkpointed, so a run restarted after
  rounds 1 and 2 aggregates the same centroids and trains the same model."""
  del tmp_cache
  reference = helpers.run_with_restarts(_digits(), str(tmp_path / 'reference'))
  resumed = helpers.run_with_restarts(_digits(), str(tmp_path / 'resumed'),
                                      restart_after=(1, 2))
  for want, got in zip(reference.history, resumed.history):
    for key in ('train_loss', 'test_accuracy', 'rfl', 'rfl_centroid_change'):
      assert got[key] == want[key], key
  assert helpers.max_difference(reference.final_weights(), resumed.final_weights()) == 0
