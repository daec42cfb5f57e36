"""DivideMix (Li et al. 2020, Algorithm 1) as a method: the client part on a toy
two-network model (the co-divide at start, a MixMatch step against the NumPy ops, the
warm-up by hand), the server's schedule and selection report, the parameters, and digits
runs (tf; equal on tff, slow)."""
import collections
import types

import helpers
import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from tff_noisy import diagnostics
from tff_noisy import methods
from tff_noisy import reporting
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.dividemix.algorithm import ScheduleAndReport
from tff_noisy.methods.dividemix.diagnostics import CleanSelection
from tff_noisy.methods.dividemix.parts import DivideMixLoss
from tff_noisy.methods.dividemix.report import SelectionSection
from tff_noisy.methods.two_networks import two_networks
from tff_noisy.ops import dividemix
from tff_noisy.ops import dividemix_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5
_C = 3
_N = 8
_WARMUP = 2
_SEED = 11


def _builder():
  return two_networks(lambda: helpers.linear_model(4, _C))


def _model():
  tf.keras.utils.set_random_seed(5)
  model = _builder()()
  model.set_weights([2.0 * w for w in model.get_weights()])  # Spread the losses.
  return model


def _client():
  x, y = helpers.random_client(7, _N, features=4, classes=_C)
  return x, y


def _part():
  return DivideMixLoss(_C, _WARMUP, threshold=0.5, temperature=0.5, alpha=4.0, lambda_u=8.0,
                       lambda_r=1.0)


def _train(active, round_num):
  model = _model()
  received = model.get_weights()
  x, y = _client()
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                  client_work.model_weights_of(model))
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           ClientProgram([_part()]), local_epochs=1,
                                           model_fn=_builder())
  hparams = collections.OrderedDict(dividemix_active=tf.constant(active, tf.float32),
                                    dividemix_round=tf.constant(round_num, tf.float32),
                                    mix_seed=tf.constant(_SEED, tf.int32))
  state = collections.OrderedDict(clean_probability=tf.fill([_N, 2], -1.0))
  dataset = helpers.client_dataset(x, y, mix_key=np.full(_N, 3, np.int32))
  result, metrics, state = train(initial, dataset, state, hparams)
  trained = [w - u.numpy() for w, u in zip(received, result.update.trainable)]
  return received, trained, metrics, state['clean_probability'].numpy()


def _logits(weights, x):
  wf, bf, wg, bg = weights
  return x @ wf + bf, x @ wg + bg


def _ce(z, y):
  return -scipy.special.log_softmax(z.astype(np.float64), 1)[np.arange(len(y)), y]


def test_the_co_divide_fits_each_network_s_gmm_on_the_received_model():
  received, _, _, w = _train(1.0, _WARMUP + 1)
  x, y = _client()
  zf, zg = _logits(received, x)
  np.testing.assert_allclose(w[:, 0], dividemix.clean_probability_em(_ce(zf, y)), atol=1e-5)
  np.testing.assert_allclose(w[:, 1], dividemix.clean_probability_em(_ce(zg, y)), atol=1e-5)


def test_a_mixmatch_step_against_the_numpy_ops():
  """One full-batch step: the targets from the pre-step logits (training mode = inference
  for a linear model) by the NumPy ops, each network trained on the other's division,
  mixed with the step's λ', π; ℓ̄ = mean_f + mean_g of the masked loss, and SGD on it."""
  round_num = _WARMUP + 1
  received, trained, metrics, w = _train(1.0, round_num)
  x, y = _client()
  zf, zg = _logits(received, x)
  labelled_f, labelled_g = w[:, 1] > 0.5, w[:, 0] > 0.5  # f trains on g's division.
  assert 0 < labelled_f.sum() < _N and 0 < labelled_g.sum() < _N, 'both sets non-empty'
  seed = tf.random.experimental.stateless_fold_in(tf.constant([_SEED, 3]), 0)
  lam, perm = (t.numpy() for t in dividemix_tf.draw(seed, _N, 4.0))
  assert 0.5 <= lam < 1 and (perm != np.arange(_N)).any()
  guess = dividemix.co_guess(zf[None], zg[None], 0.5)
  # λ_u(t) = 8 · clip((T + 0/1 − T_w) / 16, 0, 1) = 8/16 in the first round after warm-up.
  lambda_u = dividemix.lambda_u_weight(round_num, _WARMUP, 8.0)
  assert lambda_u == 0.5
  x_mixed = lam * x + (1 - lam) * x[perm]
  targets = {}
  for name, z, other, labelled in (('f', zf, w[:, 1], labelled_f),
                                   ('g', zg, w[:, 0], labelled_g)):
    refined = dividemix.refine_labels(y, other, z[None], 0.5)
    targets[name] = dividemix.mix(np.where(labelled[:, None], refined, guess), lam, perm)
  zf_mixed, zg_mixed = _logits(received, x_mixed)
  loss_f = dividemix.masked_per_example_loss(zf_mixed, targets['f'], labelled_f, lambda_u)
  loss_g = dividemix.masked_per_example_loss(zg_mixed, targets['g'], labelled_g, lambda_u)
  # Entries: 0 on the first half, 2(ℓ_f + ℓ_g) on the second.
  assert float(metrics['loss_sum']) == pytest.approx(2 * (loss_f.sum() + loss_g.sum()),
                                                     rel=1e-4)
  assert int(metrics['num_examples']) == 2 * _N
  weights = [tf.Variable(v) for v in received]
  with tf.GradientTape() as tape:
    f_mixed = x_mixed @ weights[0] + weights[1]
    g_mixed = x_mixed @ weights[2] + weights[3]
    loss = (tf.reduce_mean(dividemix_tf.masked_per_example_loss(
        f_mixed, tf.constant(targets['f'], tf.float32), labelled_f, lambda_u))
            + tf.reduce_mean(dividemix_tf.masked_per_example_loss(
                g_mixed, tf.constant(targets['g'], tf.float32), labelled_g, lambda_u)))
  expected = [v.numpy() - _LR * g.numpy() for v, g in zip(weights, tape.gradient(loss, weights))]
  for got, want in zip(trained, expected):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_warm_up_is_cross_entropy_on_both_networks_by_hand():
  """ℓ̄ = mean CE_f + mean CE_g: ∂/∂z_f,j = (softmax(z_f,j) − onehot(y_j))/N, so W_f ← W_f
  − lr·xᵀ∂Z_f, b_f ← b_f − lr·Σ_j ∂z_f,j (g alike); no division is made."""
  received, trained, metrics, w = _train(0.0, _WARMUP)
  x, y = _client()
  zf, zg = _logits(received, x)
  onehot = np.eye(_C)[y]
  expected = []
  for (wn, bn), z in zip((received[:2], received[2:]), (zf, zg)):
    dz = (scipy.special.softmax(z, 1) - onehot) / _N
    expected += [wn - _LR * x.T @ dz, bn - _LR * dz.sum(0)]
  for got, want in zip(trained, expected):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  assert float(metrics['loss_sum']) == pytest.approx(2 * (_ce(zf, y) + _ce(zg, y)).sum(),
                                                     rel=1e-5)
  np.testing.assert_array_equal(w, -1.0)


class _Process:
  @staticmethod
  def set_hparams(state, hparams):
    del state
    return hparams


def test_the_server_switches_on_after_warm_up_and_seeds_each_round():
  step = ScheduleAndReport(2, 0.5, seed=1)
  server = types.SimpleNamespace(process=_Process())
  steps = [step.before(t, None, server) for t in (1, 2, 3, 4)]
  assert [float(h['dividemix_active']) for h, _ in steps] == [0, 0, 1, 1]
  assert [float(h['dividemix_round']) for h, _ in steps] == [1, 2, 3, 4]
  assert [d for _, d in steps] == [{'dividemix_active': v} for v in (False, False, True, True)]
  assert len({int(h['mix_seed']) for h, _ in steps}) == 4
  assert step.after(2, 'state', server) == ('state', {})


def test_the_selection_report_scores_each_network_s_division():
  # Client a: true (0, 1, 2, 0), observed (0, 1, 1, 0): clean 0, 1, 3. f's w > 0.5 picks
  # 0, 2 (1 clean of 2, 1 of 3 clean); g's picks 0, 1, 3 (all clean, all of them).
  truth = diagnostics.Truth(('a',), {'a': np.array([0, 1, 1, 0])},
                            {'a': np.array([0, 1, 2, 0])}, {'a': 0.25}, {})
  w = np.array([[0.9, 0.8], [0.1, 0.7], [0.6, 0.2], [0.5, 0.99]])
  record = CleanSelection({'a': w}, 0.5)
  scored = diagnostics.score({'s': record}, truth)['dividemix_selection']
  assert scored == {'clients': 1, 'selected_f': 2, 'precision_f': 0.5,
                    'recall_f': pytest.approx(1 / 3), 'selected_g': 3, 'precision_g': 1.0,
                    'recall_g': 1.0}
  assert diagnostics.score({'s': record}, None) == {
      'dividemix_selection': {'clients': 1, 'selected_f': 2, 'selected_g': 3}}
  assert diagnostics.score({'s': CleanSelection({}, 0.5)}, truth) == {}


@pytest.mark.parametrize('params, match', [
    ({'warmup_rounds': 10}, r'^method.params.warmup_rounds: needs a number of rounds in '
                            r'\[0, fl.rounds=10\) \(or null\), got 10$'),
    ({'threshold': 1.0}, r'^method.params.threshold: needs a number in \[0, 1\), got 1.0$'),
    ({'temperature': 0}, r'^method.params.temperature: needs a number > 0, got 0$'),
    ({'alpha': -1}, r'^method.params.alpha: needs a number > 0, got -1$'),
    ({'lambda_u': -1}, r'^method.params.lambda_u: needs a number >= 0, got -1$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('dividemix', params, rounds=10)


def test_the_defaults_are_fnbench_s():
  params = methods.resolve_params('dividemix', {}, rounds=120)
  assert (params.warmup(120), params.threshold, params.temperature, params.alpha,
          params.lambda_u, params.lambda_r) == (30, 0.5, 0.5, 4.0, 25.0, 1.0)


def _digits(runtime='tf'):
  return helpers.small_digits_config('dividemix', runtime, {'warmup_rounds': 1}, rounds=3)


def test_dividemix_runs_on_digits_and_reports_its_selection():
  run = helpers.run_rounds(_digits())
  assert [r['dividemix_active'] for r in run.history] == [False, True, True]
  assert 'dividemix_selection' not in run.history[0]
  for record in run.history[1:]:
    selection = record['dividemix_selection']
    assert selection['clients'] >= 2
    for name in 'fg':
      assert selection[f'selected_{name}'] > 0
      assert 0 <= selection[f'precision_{name}'] <= 1 and 0 < selection[f'recall_{name}'] <= 1
  assert all(np.isfinite(r['test_accuracy']) for r in run.history)
  # Its report section: one summary line, one table row (the last round's record).
  last = run.history[-1]['dividemix_selection']
  results = {'rounds': run.history}
  (line,) = SelectionSection().summary(results)
  assert line.startswith('DivideMix clean selection: precision ')
  w = reporting.Writer('.')
  SelectionSection().render(w, {None: {'dividemix': [
      reporting.Run('.', 'dividemix', None, 1, results)]}})
  assert w.lines[0] == '## DivideMix clean selection'
  assert w.lines[-2].startswith(f'| dividemix | seed 1 | 3 | {last["clients"]} | '
                                f'{last["selected_f"]} |')


@pytest.mark.slow
def test_dividemix_runs_equally_on_tff_and_tf():
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  assert [r['dividemix_selection'] for r in runs['tff'].history[1:]] == [
      r['dividemix_selection'] for r in runs['tf'].history[1:]]


@pytest.mark.slow
def test_a_resumed_run_keeps_the_divisions(tmp_path):
  config = _digits()
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(1, 2))
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  assert resumed.history[-1]['dividemix_selection'] == whole.history[-1]['dividemix_selection']
