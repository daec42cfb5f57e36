"""Joint Optimization (Tanaka et al. 2018) as a method: the rows table, the client part's
step by hand on a toy model, the labels rewritten at each epoch's end (applied at the next
visit: equal to FNBench's epoch-end update), the label report against the truth, the
parameters, and digits runs (tf; equal on tff, slow)."""
import collections

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import diagnostics
from tff_noisy import methods
from tff_noisy import reporting
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.joint_optim import layout
from tff_noisy.methods.joint_optim.diagnostics import SoftLabels
from tff_noisy.methods.joint_optim.parts import JointOptimLoss
from tff_noisy.methods.joint_optim.report import CorrectedLabelsSection
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5
_ALPHA, _BETA = 1.2, 0.8


def test_the_rows_table_packs_labels_history_count_and_due():
  rows = layout.initial(np.array([1, 0]), 2, 2)
  # [labels (2) | history slot 0 (2), slot 1 (2) | count | due]
  np.testing.assert_array_equal(rows, [[0, 1, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]])
  labels, history, count, due = layout.unpack(
      layout.pack([[0.5, 0.5]], [[[0.6, 0.4], [0.8, 0.2]]], [3], [1]), 2, 2)
  np.testing.assert_allclose(history, [[[0.6, 0.4], [0.8, 0.2]]])
  assert count.tolist() == [3] and due.tolist() == [True] and labels.shape == (1, 2)
  # A due row's current label is its history's mean (÷ q), a row not due keeps its own.
  rows = layout.pack([[1, 0], [1, 0]], [[[0.6, 0.4], [0.8, 0.2]], [[0.2, 0.8], [0, 0]]],
                     [2, 1], [1, 0])
  np.testing.assert_allclose(layout.current_labels(rows, 2, 2), [[0.7, 0.3], [1, 0]])
  np.testing.assert_allclose(layout.current_labels(rows, 2, 2, hard=True), [[1, 0], [1, 0]])
  np.testing.assert_allclose(layout.current_labels(rows, 2, 2, divide_by_filled=True)[0],
                             [0.7, 0.3])


def _model():
  """Two inputs, two classes, W = I and b = 0: the logits are the inputs."""
  model = helpers.linear_model(2, 2)
  model.set_weights([np.eye(2, dtype=np.float32), np.zeros(2, np.float32)])
  return model


_X = np.array([[1, 0], [0, 2]], np.float32)
_Y = np.array([0, 0])


def _train(rows, active, local_epochs=1):
  model = _model()
  received = model.get_weights()
  part = JointOptimLoss(2, _ALPHA, _BETA, queue_size=2)
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           ClientProgram([part]), local_epochs=local_epochs)
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                  client_work.model_weights_of(model))
  result, metrics, state = train(
      initial, helpers.client_dataset(_X, _Y),
      collections.OrderedDict(joint_optim_rows=tf.constant(rows)),
      collections.OrderedDict(active=tf.constant(active, tf.float32)))
  weights = [w - u.numpy() for w, u in zip(received, result.update.trainable)]
  return weights, metrics, state['joint_optim_rows'].numpy()


def _loss(weights, x, labels):
  """L = -1/B Σ_j y_j·log s_j + α Σ_c p_c log(p_c / s̄_c) + β·1/B Σ_j H(s_j), p = (1/2, 1/2)."""
  s = tf.nn.softmax(x @ weights[0] + weights[1])
  s_bar = tf.reduce_mean(s, axis=0)
  l_c = -tf.reduce_mean(tf.reduce_sum(labels * tf.math.log(s), axis=1))
  l_p = tf.reduce_sum(0.5 * tf.math.log(0.5 / s_bar))
  l_e = -tf.reduce_mean(tf.reduce_sum(s * tf.math.log(s), axis=1))
  return l_c + _ALPHA * l_p + _BETA * l_e, s


def _sgd(weights, x, labels):
  variables = [tf.Variable(w) for w in weights]
  with tf.GradientTape() as tape:
    loss, s = _loss(variables, x, labels)
  grads = tape.gradient(loss, variables)
  return [w - _LR * g.numpy() for w, g in zip(weights, grads)], loss.numpy(), s.numpy()


def test_a_step_by_hand():
  """Example 0 is due: its label becomes the mean of its history, ([0.6, 0.4] + [0.8, 0.2])/2
  = [0.7, 0.3], before the step; example 1 is not: it keeps [1, 0]. The step trains on L
  with those labels; each history takes the step's softmax at slot count mod 2 (0 and 1),
  the counts go up, and both rows are due after a round that updates labels."""
  rows = layout.pack([[1, 0], [1, 0]], [[[0.6, 0.4], [0.8, 0.2]], [[0.2, 0.8], [0, 0]]],
                     [2, 1], [1, 0])
  weights, metrics, new_rows = _train(rows, 1.0)
  labels = np.array([[0.7, 0.3], [1, 0]], np.float32)
  expected, loss, s = _sgd(_model().get_weights(), _X, labels)
  np.testing.assert_allclose(s, [[np.e / (1 + np.e), 1 / (1 + np.e)],
                                 [1 / (1 + np.e ** 2), np.e ** 2 / (1 + np.e ** 2)]], rtol=1e-6)
  for got, want in zip(weights, expected):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  assert float(metrics['loss_sum']) == pytest.approx(2 * loss, rel=1e-5)  # B·(batch mean).
  np.testing.assert_allclose(new_rows, layout.pack(
      labels, [[s[0], [0.8, 0.2]], [[0.2, 0.8], s[1]]], [3, 2], [1, 1]), rtol=1e-6)
  # In warm-up (nothing due: no round has updated labels yet) the rows train on their
  # stored labels ([1, 0] both), which stay, and nothing becomes due.
  rows[:, -1] = 0
  weights, _, warm_rows = _train(rows, 0.0)
  for got, want in zip(weights, _sgd(_model().get_weights(), _X, np.eye(2)[_Y])[0]):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(warm_rows[:, :2], rows[:, :2])
  np.testing.assert_array_equal(layout.unpack(warm_rows, 2, 2)[3], [False, False])


def test_labels_are_rewritten_at_each_epoch_end_as_fnbench():
  """Two local epochs of one batch, FNBench's loop: epoch 1 trains on the one-hot labels
  and records s⁽¹⁾; at its end the labels become the history's mean, s⁽¹⁾/2 (÷ q = 2);
  epoch 2 trains on them and records s⁽²⁾; at its end they become (s⁽¹⁾ + s⁽²⁾)/2."""
  weights, _, rows = _train(layout.initial(_Y, 2, 2), 1.0, local_epochs=2)
  first, _, s1 = _sgd(_model().get_weights(), _X, np.eye(2)[_Y])
  second, _, s2 = _sgd(first, _X, s1 / 2)
  for got, want in zip(weights, second):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(layout.unpack(rows, 2, 2)[0], s1 / 2, rtol=1e-5)  # Stored.
  np.testing.assert_allclose(layout.current_labels(rows, 2, 2), (s1 + s2) / 2, rtol=1e-5)


def test_the_report_scores_the_labels_argmax_against_the_truth():
  # Client a's labels argmax to 1, 0, 0 against true 1, 0, 1 (2/3 right); its flipped
  # example (observed 0 ≠ true 1) is example 0, corrected; the unflipped 1 and 2: 1 of 2 kept.
  truth = diagnostics.Truth(('a',), {'a': np.array([0, 0, 1])}, {'a': np.array([1, 0, 1])},
                            {'a': 1 / 3}, {})
  record = SoftLabels({'a': np.array([[0.4, 0.6], [0.9, 0.1], [0.7, 0.3]])})
  assert diagnostics.score({'c': record}, truth)['corrected_labels'] == {
      'clients': 1, 'accuracy': pytest.approx(2 / 3), 'flips_corrected': 1.0,
      'clean_kept': 0.5}


@pytest.mark.parametrize('params, match', [
    ({'alpha': -1}, r'^method.params.alpha: needs a number >= 0, got -1$'),
    ({'beta': -0.1}, r'^method.params.beta: needs a number >= 0, got -0.1$'),
    ({'queue_size': 0}, r'^method.params.queue_size: needs an integer >= 1, got 0$'),
    ({'warmup_rounds': -1}, r'^method.params.warmup_rounds: needs a number of rounds in '
                            r'\[0, fl.rounds=10\) \(or null\), got -1$'),
    ({'labeling': 'mixed'}, r"^method.params.labeling: needs 'soft' or 'hard', got 'mixed'$"),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('joint_optim', params, rounds=10)


def test_the_defaults_are_fnbench_s():
  params = methods.resolve_params('joint_optim', {}, rounds=100)
  assert (params.alpha, params.beta, params.queue_size, params.warmup(100), params.labeling,
          params.divide_by_filled) == (1.2, 0.8, 15, 20, 'soft', False)


def _digits(runtime='tf', **params):
  return helpers.small_digits_config('joint_optim', runtime, {'warmup_rounds': 1, **params},
                                     rounds=3, local_epochs=2)


def test_joint_optim_runs_on_digits_and_reports_its_labels():
  run = helpers.run_rounds(_digits())
  assert [r['label_updates'] for r in run.history] == [False, True, True]
  assert 'corrected_labels' not in run.history[0]
  last = run.history[-1]['corrected_labels']
  assert last['clients'] >= 2 and 0 < last['accuracy'] <= 1
  assert 0 <= last['flips_corrected'] <= 1 and 0 <= last['clean_kept'] <= 1
  assert np.isfinite(run.history[-1]['test_accuracy'])
  fedavg = helpers.run_rounds(helpers.small_digits_config('fedavg', rounds=3, local_epochs=2))
  assert helpers.max_difference(run.final_weights(), fedavg.final_weights()) > 1e-4
  # Its report section: one summary line, one table row (the last round's record).
  results = {'rounds': run.history}
  (line,) = CorrectedLabelsSection().summary(results)
  assert line.startswith(f'Joint Optimization labels: accuracy {last["accuracy"]:.3f}')
  w = reporting.Writer('.')
  CorrectedLabelsSection().render(w, {None: {'joint_optim': [
      reporting.Run('.', 'joint_optim', None, 1, results)]}})
  assert w.lines[0] == '## Joint Optimization labels'
  assert w.lines[-2].startswith(f'| joint_optim | seed 1 | 3 | {last["clients"]} |')


@pytest.mark.slow
def test_joint_optim_runs_equally_on_tff_and_tf():
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  for a, b in zip(runs['tff'].history[1:], runs['tf'].history[1:]):
    assert a['corrected_labels'] == pytest.approx(b['corrected_labels'], abs=1e-6)


@pytest.mark.slow
def test_a_resumed_run_keeps_the_labels_and_histories(tmp_path):
  config = _digits()
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(1, 2))
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  assert resumed.history[-1]['corrected_labels'] == whole.history[-1]['corrected_labels']
