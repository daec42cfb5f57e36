"""FedCorr: its maths by hand (LID, the GMM splits of clients and of a client's losses,
the relabelling rule, the adaptive proximal gradient and its TensorFlow twin, the
relabelling counts), its stage lengths and parameter errors, one client's pre-processing
round against hand-made steps, and a digits run through the three stages on both client
runtimes."""

import json

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import (ClientContext, ClientProgram, CrossEntropy, Mixup,
                                               Outputs)
from tff_noisy.federated.client_parts import mixup as mixup_part
from tff_noisy.methods import fedcorr as fedcorr_method
from tff_noisy.methods.fedcorr.parts import AdaptiveProximal
from tff_noisy.ops import fedcorr
from tff_noisy.ops import knn
from tff_noisy.ops import mixup
from tff_noisy.ops import mixup_tf
from tff_noisy.simulation import assembly
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5


def test_lid_by_hand():
  # Points 0, 1, 3 with k = 2: each one's two others, at distances (1, 3), (1, 2), (2, 3).
  def by_hand(near, far):
    eps = fedcorr.LID_EPS
    return -2 / (np.log(near / (far + eps)) + np.log(far / (far + eps)) + eps)

  np.testing.assert_allclose(fedcorr.lid([[0.], [1.], [3.]], 2),
                             [by_hand(1, 3), by_hand(1, 2), by_hand(2, 3)], rtol=1e-12)
  assert fedcorr.client_lid([[0.], [1.], [3.]], 20) == pytest.approx(  # k clipped to 2.
      np.mean([by_hand(1, 3), by_hand(1, 2), by_hand(2, 3)]))
  assert fedcorr.client_lid([[0.5]], 20) == 0.0


def test_gmm_splits_clients_on_lid_and_a_client_on_its_losses():
  np.testing.assert_array_equal(fedcorr.noisy_clients([1.0, 1.1, 0.9, 5.0, 5.2], seed=0),
                                [False, False, False, True, True])
  assert not fedcorr.noisy_clients([2.0, 2.0, 2.0], seed=0).any()
  rng = np.random.default_rng(0)
  losses = np.concatenate([0.1 + 0.01 * rng.normal(size=70), 3.0 + 0.01 * rng.normal(size=30)])
  assert fedcorr.noise_level(losses, seed=0) == pytest.approx(0.3)
  assert fedcorr.noise_level([0.5], seed=0) == 0.0


def test_a_client_without_outputs_is_noisy_not_the_cleanest():
  """A client whose update was rejected keeps its table of zeros: no LID score (its 0.0
  would be the lowest), flagged noisy, and the others split as without it."""
  assert np.isnan(fedcorr.client_lid(np.zeros((5, 3)), 20))
  assert fedcorr.client_lid(np.full((5, 3), 1 / 3), 20) == 0.0  # Outputs, all alike.
  scores = [1.0, 1.1, 0.9, 5.0, 5.2]
  np.testing.assert_array_equal(fedcorr.noisy_clients(scores + [np.nan], seed=0),
                                [*fedcorr.noisy_clients(scores, seed=0), True])
  np.testing.assert_array_equal(fedcorr.noisy_clients([np.nan, 2.0, 2.0], seed=0),
                                [True, False, False])
  no_outputs = fedcorr.sample_losses(np.zeros((5, 3)), [0, 1, 2, 0, 1])
  assert fedcorr.noise_level(no_outputs, seed=0) == 1.0
  assert fedcorr.noise_level(np.full(5, 0.7), seed=0) == 0.0


def test_sample_losses_are_minus_log_p():
  np.testing.assert_allclose(fedcorr.sample_losses([[0.25, 0.75], [0.5, 0.5]], [1, 0]),
                             [-np.log(0.75), np.log(2)])


def test_relabelling_rule_by_hand():
  losses = [0.1, 5.0, 3.0, 0.2]
  np.testing.assert_array_equal(fedcorr.relabel_candidates(losses, 0.5, 1.0), [1, 2])
  np.testing.assert_array_equal(fedcorr.relabel_candidates(losses, 0.5, 0.5), [1])
  probs = [[0.9, 0.1], [0.2, 0.8], [0.45, 0.55], [0.3, 0.7]]
  result = fedcorr.relabel([0, 0, 0, 0], probs, 0.5, candidates=[1, 2])
  np.testing.assert_array_equal(result.labels, [0, 1, 1, 0])
  np.testing.assert_array_equal(result.changed, [1, 2])
  np.testing.assert_array_equal(fedcorr.relabel([0, 0, 0, 0], probs, 0.6).labels, [0, 1, 0, 1])


def test_relabelling_counts_by_hand():
  assert knn.relabelling_counts([0, 1, 2, 0], [0, 2, 2, 1], [0, 2, 1, 0]) == {
      'changed': 2, 'corrected': 1, 'broken': 1, 'wrong_before': 2, 'wrong_after': 2}


def test_proximal_gradient_and_its_tf_twin():
  grads = fedcorr.proximal_gradients([np.array([3.]), np.array([[4.]])],
                                     [np.zeros(1), np.zeros((1, 1))], 2.0)
  np.testing.assert_allclose(grads[0], [1.2])
  np.testing.assert_allclose(grads[1], [[1.6]])
  assert all(not g.any() for g in fedcorr.proximal_gradients([np.ones(2)], [np.ones(2)], 2.0))
  rng = np.random.default_rng(1)
  w, w0 = [rng.normal(size=(3, 2)), rng.normal(size=2)], [rng.normal(size=(3, 2)),
                                                           rng.normal(size=2)]
  ctx = ClientContext({}, values={'proximal': tf.constant(0.7, tf.float64)},
                      initial_trainable=[tf.constant(v) for v in w0])
  got = AdaptiveProximal(2).step([tf.zeros(v.shape, tf.float64) for v in w],
                                 [tf.constant(v) for v in w], ctx)
  for g, want in zip(got, fedcorr.proximal_gradients(w, w0, 0.7)):
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)


def test_stage_lengths_fill_the_rounds():
  params = fedcorr_method.FedCorrParams
  assert params(t1=2).stage_lengths(10) == (2, 4, 4)
  assert params(t1=2, t2=3).stage_lengths(10) == (2, 3, 5)
  assert params(t1=2, t3=1).stage_lengths(10) == (2, 7, 1)
  assert params(t1=2, t2=3, t3=5).stage_lengths(10) == (2, 3, 5)


def _config(runtime='tff', rounds=4, method='fedcorr', participation=0.5, **params):
  config = config_lib.from_dict({
      'seed': 1, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 6},
      'noise': {'name': 'symmetric', 'rate': 0.8, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp'},
      'method': {'name': method, 'params': params},
      'fl': {'rounds': rounds, 'participation': participation, 'batch_size': 32,
             'client_lr': 0.05, 'client_runtime': runtime}})
  validation.validate_experiment(config)
  return config


@pytest.mark.parametrize('params, field', [
    ({'t1': 0}, 't1'), ({'t1': 10}, 't1'), ({'t2': 9}, 't2'), ({'t2': 3, 't3': 3}, 't3'),
    ({'t3': 9}, 't3'), ({'t2': -1}, 't2'), ({'frac1': 0}, 'frac1'), ({'beta': -1}, 'beta'),
    ({'relabel_ratio': 1.5}, 'relabel_ratio'), ({'confidence': 1}, 'confidence'),
    ({'clean_threshold': 2}, 'clean_threshold'), ({'lid_k': 0}, 'lid_k'),
    ({'mixup_alpha': 0}, 'mixup_alpha')])
def test_bad_params_are_one_line_errors_naming_the_field(params, field):
  with pytest.raises(config_lib.ConfigError, match=f'^method.params.{field}: needs') as error:
    _config(rounds=10, **params)
  assert '\n' not in str(error.value)


def test_mixup_mixes_each_step_from_the_round_client_and_step_and_weighs_both_labels():
  """The code's mixup_data / mixup_criterion, drawn from (round seed, client key, step)."""
  program = ClientProgram([AdaptiveProximal(3), Mixup(1.0)])
  assert mixup_part.MIX_SEED in program.hparams
  x, y = helpers.random_client(0, 6)
  batch = {'x': tf.constant(x), 'y': tf.constant(y, tf.int64),
           'mix_key': tf.fill([6], 4)}
  hparams = {'mix_seed': tf.constant(11)}

  def mix_batch(program, batch, step):
    ctx = ClientContext(hparams)
    ctx.step = tf.constant(step, tf.int64)
    return program.batch(batch, ctx), ctx

  mixed, ctx = mix_batch(program, batch, 2)
  lam, permutation = mixup_tf.draw(
      tf.random.experimental.stateless_fold_in(tf.constant([11, 4]), 2), 6, 1.0)
  np.testing.assert_allclose(mixed['x'], mixup.mix(x, float(lam), permutation.numpy()),
                             rtol=1e-6, atol=1e-6)
  logits = tf.constant(np.random.default_rng(1).normal(size=(6, 3)), tf.float32)
  np.testing.assert_allclose(
      program.loss(mixed, Outputs(logits), ctx),
      mixup.mixed_cross_entropy(logits.numpy(), y, permutation.numpy(), float(lam)),
      rtol=1e-5)
  other_step, _ = mix_batch(program, batch, 3)
  other_client, _ = mix_batch(program, dict(batch, mix_key=tf.fill([6], 5)), 2)
  for other in (other_step, other_client):
    assert not np.allclose(other['x'], mixed['x'])
  plain = ClientProgram([AdaptiveProximal(3), CrossEntropy()])
  assert mix_batch(plain, batch, 2)[0] is batch
  assert mixup_part.MIX_SEED not in plain.hparams


@pytest.mark.slow  # Builds a TFF process: 55 s measured on the shared 2-core machine.
def test_a_preprocessing_client_trains_with_the_adaptive_proximal_term_and_returns_outputs():
  x, y = helpers.random_client(0, 8)
  program = ClientProgram([AdaptiveProximal(3), CrossEntropy()])
  process = process_lib.build_process(helpers.linear_model,
                                      helpers.client_dataset(x, y, 4).element_spec,
                                      tff.learning.optimizers.build_sgdm(_LR),
                                      program=program)
  tf.keras.utils.set_random_seed(0)
  model = helpers.linear_model()
  received = model.get_weights()
  state = program.initial_state(y)
  state['noise_level'] = np.float32(0.5)
  for preprocessing in (1, 0):
    start = process.set_hparams(assembly.initial_state(process, model), {
        'preprocessing': np.int32(preprocessing), 'beta': np.float32(2.0)})
    out = process.next(start, [helpers.client_data(x, y, 4)], [state])
    # Two steps of 4: the first without the term (w = w_g), the second with it.
    local = helpers.linear_model()
    weights = [w.copy() for w in received]
    for batch in (slice(0, 4), slice(4, 8)):
      local.set_weights(weights)
      with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            y[batch], local(x[batch])))
      grads = tape.gradient(loss, local.trainable_variables)
      proximal = fedcorr.proximal_gradients(weights, received, 2.0 * 0.5)
      weights = [w - _LR * (g.numpy() + p) for w, g, p in zip(weights, grads, proximal)]
    for got, want in zip(process.get_model_weights(out.state).trainable, weights):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    local.set_weights(weights)
    probs = out.client_states[0]['probs']
    if preprocessing:
      np.testing.assert_allclose(probs, tf.nn.softmax(local(x)).numpy(), rtol=1e-5,
                                 atol=1e-6)
    else:
      np.testing.assert_array_equal(probs, state['probs'])
    assert float(out.client_states[0]['noise_level']) == 0.5


def _run(runtime, method='fedcorr', **params):
  return driver.run_experiment(_config(runtime, method=method, **params), None,
                               progress=False)


@pytest.mark.slow
def test_digits_run_goes_through_the_three_stages_equal_on_both_runtimes(tmp_cache):
  del tmp_cache
  params = dict(t1=2, t2=1, frac1=0.5, clean_threshold=0.2, confidence=0.3)
  runs = {runtime: _run(runtime, **params) for runtime in ('tff', 'tf')}
  rounds = runs['tff'].rounds
  assert [r.get('sub_rounds') for r in rounds] == [2, 2, None, None]
  assert [len(r['clients']) for r in rounds[:2]] == [6, 6]
  for iteration, record in enumerate(rounds[:2], 1):
    pre = record['fedcorr_preprocessing']
    assert pre['iteration'] == iteration and len(pre['cumulative_lid']) == 6
    truth = record['detection_truth']
    assert truth['truly_noisy'] == 3
    for score in ('precision', 'recall'):
      assert truth[score] is None or 0 <= truth[score] <= 1
    flagged = record['noisy_clients']
    assert sorted(pre['relabelled']) == sorted(flagged)
    if flagged:
      overall = record['relabelling']['overall']
      assert overall['changed'] <= sum(pre['relabelled'].values())
      assert {'corrected', 'broken', 'wrong_before', 'wrong_after'} <= set(overall)
  assert rounds[1]['detection_truth']['recall'] == 1.0  # 80% symmetric noise: obvious.
  clean = rounds[2]['fedcorr_clean_clients']
  assert set(rounds[2]['clients']) <= set(clean) and len(rounds[2]['clients']) == min(3, len(
      clean))
  assert 'relabelling' in rounds[2] and 'relabelling' not in rounds[3]  # After fine-tuning.
  fedavg = _run('tf', method='fedavg')
  assert [r['test_accuracy'] for r in rounds] != [r['test_accuracy'] for r in fedavg.rounds]
  for want, got in zip(rounds, runs['tf'].rounds):
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-3)
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-4)
    assert got.get('noisy_clients') == want.get('noisy_clients')


@pytest.mark.slow
def test_a_run_resumed_mid_preprocessing_and_in_fine_tuning_equals_an_uninterrupted_one(
    tmp_path, tmp_cache):
  """Cumulative LID, flags, μ̂ and corrected labels live in the store's learned state."""
  del tmp_cache
  config = _config('tf', t1=2, t2=1, frac1=0.5, clean_threshold=0.2, confidence=0.3)
  reference = helpers.run_with_restarts(config, str(tmp_path / 'reference'))
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'resumed'), restart_after=(1, 3))
  for want, got in zip(reference.history, resumed.history):
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-6)
    assert got.get('noisy_clients') == want.get('noisy_clients')
    assert json.dumps(got.get('relabelling'), sort_keys=True) == json.dumps(  # NaN-safe.
        want.get('relabelling'), sort_keys=True)
  for cid in reference.data.client_ids:
    np.testing.assert_array_equal(resumed.store.get(cid, 'labels', reference.data.y[cid]),
                                  reference.store.get(cid, 'labels', reference.data.y[cid]))


def test_clients_whose_nan_updates_were_rejected_are_flagged_not_fine_tuned_on(tmp_cache):
  """Replays the probe: NaN Byzantine clients keep their table of zeros (LID 0.0 made
  them the cleanest, and fine-tuning trained only on them)."""
  del tmp_cache
  values = _config('tf', rounds=3, t1=1, t2=1, frac1=0.5).to_dict()
  values['faults'] = {'byzantine': 0.34, 'behaviour': 'nan'}
  config = config_lib.from_dict(values)
  rounds = driver.run_experiment(config, None, progress=False).rounds
  byzantine = rounds[0]['byzantine_clients']
  assert len(byzantine) == 2
  pre = rounds[0]['fedcorr_preprocessing']
  assert all(np.isnan(pre['cumulative_lid'][cid]) for cid in byzantine)  # No score.
  assert set(byzantine) <= set(rounds[0]['noisy_clients'])
  assert not set(byzantine) & set(rounds[1]['fedcorr_clean_clients'])
