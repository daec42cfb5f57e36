"""FedNoRo: its maths by hand (λ's ramp, the logit-adjusted distillation loss and its
TensorFlow twin, DaAgg's weights, the GMM split), its parameters' errors, one client's
round against a hand-made step, and a digits run on both client runtimes."""

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.fednoro.parts import FedNoRoLoss, KD_WEIGHT
from tff_noisy.ops import detection
from tff_noisy.ops import fednoro
from tff_noisy.ops import fednoro_tf
from tff_noisy.ops import label_distribution_tf as ld_tf
from tff_noisy.simulation import assembly
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5


def test_kd_weight_ramps_from_a_e_minus_5_to_a():
  a = 0.8
  assert fednoro.kd_weight(1, a, 11, 50) == pytest.approx(a * np.exp(-5))
  assert fednoro.kd_weight(11, a, 11, 50) == pytest.approx(a * np.exp(-5))
  assert fednoro.kd_weight(30.5, a, 11, 50) == pytest.approx(a * np.exp(-1.25))
  assert fednoro.kd_weight(50, a, 11, 50) == pytest.approx(a)
  assert fednoro.kd_weight(80, a, 11, 50) == pytest.approx(a)
  with pytest.raises(ValueError, match='end > start'):
    fednoro.kd_weight(1, a, 5, 5)


def test_kd_loss_by_hand():
  # Two present classes, equal prior: log q = log softmax(z). z = 0, teacher z = 0:
  # p = q = (1/2, 1/2), KL = 0 and the loss is (1 - λ) log 2.
  loss = fednoro.logit_adjusted_kd_loss([[0., 0.]], [1], [[0., 0.]], [3, 3], 0.25, 0.8)
  np.testing.assert_allclose(loss, [0.75 * np.log(2)])
  # A third class the client lacks: its log q is replaced by 0, so with z = 0 and a
  # uniform teacher KL = log(1/3) - (2/3) log(1/2), and -log q_0 = log 2.
  loss = fednoro.logit_adjusted_kd_loss([[0., 0., 0.]], [0], [[0., 0., 0.]], [1, 1, 0], 0.5,
                                        1.0)
  kl = np.log(1 / 3) - 2 / 3 * np.log(0.5)
  np.testing.assert_allclose(loss, [0.5 * np.log(2) + 0.5 * kl], rtol=1e-6)
  # λ = 0 is the logit-adjusted CE: prior (3/4, 1/4) on z = 0 gives -log(3/4) for class 0.
  loss = fednoro.logit_adjusted_kd_loss([[0., 0.]], [0], [[5., -5.]], [3, 1], 0.0, 0.8)
  np.testing.assert_allclose(loss, [-np.log(0.75)])


def test_kd_loss_tf_twin_equals_numpy():
  rng = np.random.default_rng(0)
  logits, teacher = rng.normal(size=(2, 6, 4)) * 3
  labels = np.array([0, 1, 2, 0, 1, 2])
  counts = np.array([2., 2., 2., 0.])
  want = fednoro.logit_adjusted_kd_loss(logits, labels, teacher, counts, 0.3, 0.8)
  prior = ld_tf.prior_from_counts(tf.constant(counts, tf.float32))
  got = fednoro_tf.logit_adjusted_kd_loss(
      labels, tf.constant(logits, tf.float32),
      tf.nn.softmax(tf.constant(teacher, tf.float32) / 0.8), tf.math.log(prior),
      tf.constant(counts > 0), 0.3)
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_model_distance_sums_per_variable_norms():
  assert fednoro.model_distance([np.array([3., 4.]), np.array([[1.]])],
                                [np.zeros(2), np.array([[0.]])]) == pytest.approx(6.0)


def test_daagg_weights_by_hand():
  # One clean client at 0; noisy ones at distance 1 and 2 -> D = (0, 1/2, 1).
  updates = [[np.array([0.])], [np.array([1.])], [np.array([2.])]]
  result = fednoro.daagg_weights([10, 10, 20], [False, True, True], updates)
  raw = np.array([10, 10 * np.exp(-0.5), 20 * np.exp(-1)])
  np.testing.assert_allclose(result.weights, raw / raw.sum())
  np.testing.assert_allclose(result.distances, [0, 0.5, 1])
  assert result.status == fednoro.OK
  # The distance is to the *nearest* clean client; a client of size 0 (a non-finite
  # update) is no reference and gets weight 0.
  updates = [[np.array([0.])], [np.array([3.])], [np.array([4.])], [np.array([3.5])]]
  result = fednoro.daagg_weights([1, 1, 1, 0], [False, False, True, False], updates)
  np.testing.assert_allclose(result.distances, [0, 0, 1, 0])
  raw = np.array([1, 1, np.exp(-1), 0])
  np.testing.assert_allclose(result.weights, raw / raw.sum())


def test_daagg_without_noisy_or_clean_clients_weighs_by_examples():
  updates = [[np.array([0.])], [np.array([1.])]]
  for flags, status in (([False, False], fednoro.NO_NOISY), ([True, True], fednoro.NO_CLEAN)):
    result = fednoro.daagg_weights([1, 3], flags, updates)
    np.testing.assert_allclose(result.weights, [0.25, 0.75])
    assert result.status == status


def test_gmm_split_flags_the_high_loss_clients():
  # Four clients near 0.2 on every class, two near 2.0: the two are noisy.
  rng = np.random.default_rng(0)
  losses = np.vstack([0.2 + 0.01 * rng.normal(size=(4, 3)),
                      2.0 + 0.01 * rng.normal(size=(2, 3))])
  losses[0, 2] = np.nan  # A client without class 2: filled with the column's minimum.
  np.testing.assert_array_equal(detection.vote(losses).noisy, [0, 0, 0, 0, 1, 1])


def _config(method='fednoro', runtime='tff', rounds=3, **params):
  config = config_lib.from_dict({
      'seed': 1, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 6},
      'noise': {'name': 'symmetric', 'rate': 0.8, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp'},
      'method': {'name': method, 'params': params},
      'fl': {'rounds': rounds, 'participation': 1.0, 'batch_size': 32, 'client_lr': 0.05,
             'client_runtime': runtime}})
  validation.validate_experiment(config)
  return config


@pytest.mark.parametrize('params, field', [
    ({'warmup_rounds': 20}, 'warmup_rounds'), ({'warmup_rounds': 0}, 'warmup_rounds'),
    ({'kd_weight': 1.5}, 'kd_weight'), ({'rampup_end': 11}, 'rampup_end'),
    ({'rampup_start': 0}, 'rampup_start'), ({'temperature': 0}, 'temperature'),
    ({'gmm_fits': 0}, 'gmm_fits')])
def test_bad_params_are_one_line_errors_naming_the_field(params, field):
  with pytest.raises(config_lib.ConfigError, match=f'^method.params.{field}: needs') as error:
    _config(rounds=20, **params)
  assert '\n' not in str(error.value)


def _sgd_step(weights, x, loss_fn):
  """The weights after one full-batch SGD step on mean(loss_fn(logits))."""
  local = helpers.linear_model()
  local.set_weights(weights)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(loss_fn(local(x)))
  grads = tape.gradient(loss, local.trainable_variables)
  return [w - _LR * g.numpy() for w, g in zip(weights, grads)]


@pytest.mark.slow  # Builds a TFF process: 55 s measured on the shared 2-core machine.
def test_a_noisy_client_distils_from_the_received_model_and_a_clean_one_does_not():
  x, y = helpers.random_client(0, 8)
  y[:3] = [0, 0, 1]
  y[y == 2] = 1  # Class 2 absent: the loss leaves it out of q.
  program = ClientProgram([FedNoRoLoss(3, temperature=0.8)])
  process = process_lib.build_process(helpers.linear_model,
                                      helpers.client_dataset(x, y).element_spec,
                                      tff.learning.optimizers.build_sgdm(_LR),
                                      program=program)
  tf.keras.utils.set_random_seed(0)
  model = helpers.linear_model()
  start = process.set_hparams(assembly.initial_state(process, model),
                              {KD_WEIGHT: np.float32(0.4)})
  received = model.get_weights()
  counts = np.bincount(y, minlength=3).astype(np.float32)
  log_prior = tf.math.log(ld_tf.prior_from_counts(tf.constant(counts)))
  teacher = tf.nn.softmax(model(x) / 0.8)
  for noisy, loss_fn in (
      (1, lambda z: fednoro_tf.logit_adjusted_kd_loss(y, z, teacher, log_prior,
                                                      tf.constant(counts > 0), 0.4)),
      (0, lambda z: ld_tf.logit_adjusted_cross_entropy(y, z, log_prior))):
    state = program.initial_state(y)
    state['noisy'] = np.int32(noisy)
    out = process.next(start, [helpers.client_data(x, y)], [state])
    for got, want in zip(process.get_model_weights(out.state).trainable,
                         _sgd_step(received, x, loss_fn)):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert out.metrics['client_work']['train']['objective']['noisy_client'] == noisy
    assert int(out.client_states[0]['noisy']) == noisy


def _run(runtime, rounds=4, method='fednoro', **params):
  return driver.run_experiment(_config(method, runtime, rounds, **params), None,
                               progress=False)


@pytest.mark.slow
def test_digits_run_detects_distils_weighs_and_equals_on_both_runtimes(tmp_cache):
  del tmp_cache
  params = dict(warmup_rounds=2, rampup_start=3, rampup_end=4)
  runs = {runtime: _run(runtime, **params) for runtime in ('tff', 'tf')}
  rounds = runs['tff'].rounds
  assert 'detection' not in rounds[0] and 'detection' not in rounds[1]
  detected = rounds[2]
  assert detected['detection']['status'] == detection.OK
  truth = detected['detection_truth']
  assert truth['truly_noisy'] == 3
  for score in ('precision', 'recall'):
    assert 0 <= truth[score] <= 1
  assert truth['recall'] == 1.0  # 80% symmetric noise after two rounds: obvious.
  assert [r.get('kd_weight') for r in rounds] == pytest.approx(
      [None, None, 0.8 * np.exp(-5), 0.8])
  for record in rounds[2:]:
    assert record['daagg']['status'] == fednoro.OK
    weights = np.array([record['daagg_weights'][c] for c in record['clients']])
    sizes = np.array(record['client_weights'])
    assert weights.sum() == pytest.approx(1.0)
    assert not np.allclose(weights, sizes / sizes.sum())  # Not FedAvg's weights.
    assert record['daagg_weight_on_noisy'] < record['daagg_examples_on_noisy']
    assert record['objective']['noisy_client'] == pytest.approx(
        len(detected['noisy_clients']) / len(record['clients']))
  fedavg = _run('tf', method='fedavg')
  assert [r['test_accuracy'] for r in rounds] != [r['test_accuracy'] for r in fedavg.rounds]
  for want, got in zip(rounds, runs['tf'].rounds):
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-3)
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-4)
    for cid, weight in want.get('daagg_weights', {}).items():
      assert got['daagg_weights'][cid] == pytest.approx(weight, abs=1e-4)


@pytest.mark.slow
def test_a_run_resumed_before_and_after_detection_equals_an_uninterrupted_one(
    tmp_path, tmp_cache):
  """The flags, fixed once at detection, live in the store's checkpointed client state:
  a run restarted just before detection and just after it detects, distils and weighs
  as the uninterrupted run, to the last bit."""
  del tmp_cache
  config = _config(runtime='tf', rounds=4, warmup_rounds=2, rampup_start=3, rampup_end=4)
  reference = helpers.run_with_restarts(config, str(tmp_path / 'reference'))
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'resumed'), restart_after=(2, 3))
  assert reference.history[2]['noisy_clients'] and 'detection' not in resumed.history[3]
  for want, got in zip(reference.history, resumed.history):
    for key in ('test_accuracy', 'train_loss', 'noisy_clients', 'daagg_weights',
                'kd_weight'):
      assert got.get(key) == want.get(key), key
  assert helpers.max_difference(reference.final_weights(), resumed.final_weights()) == 0
