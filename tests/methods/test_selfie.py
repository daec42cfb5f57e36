"""SELFIE (Song et al. 2019, Algorithm 1) as a method: the rows table, the client part's
step by hand on a toy model (refurbishment, stickiness, the clean ∪ refurbished loss, the
warm-up), the refurbishment report against the truth, the parameters, and digits runs (tf;
equal on tff, slow)."""
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
from tff_noisy.methods.selfie import layout
from tff_noisy.methods.selfie.diagnostics import Refurbishment
from tff_noisy.methods.selfie.parts import SelfieLoss
from tff_noisy.methods.selfie.report import RefurbishmentSection
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5


def test_the_rows_table_packs_history_count_and_label():
  rows = layout.initial(2, 3)
  np.testing.assert_array_equal(rows, [[0, 0, 0, 0, -1], [0, 0, 0, 0, -1]])
  assert rows.dtype == np.float32
  history, count, refurbished = layout.unpack(
      layout.pack([[2, 1, 0]], [7], [-1]), 3)
  np.testing.assert_array_equal(history, [[2, 1, 0]])
  assert count.tolist() == [7] and refurbished.tolist() == [-1]
  assert history.dtype == count.dtype == np.int32


def _model():
  """Three inputs, three classes, W = I and b = 0: the logits are the inputs."""
  model = helpers.linear_model(3, 3)
  model.set_weights([np.eye(3, dtype=np.float32), np.zeros(3, np.float32)])
  return model


# x = logits, their predictions (first class on a tie) and observed labels:
_X = np.array([[0, 0, 2], [1, 0, 0], [0, 2, 0], [0, 1, 1]], np.float32)  # predicted 2, 0, 1, 1
_Y = np.array([0, 0, 1, 2])
# q = 3. Example 0: history [2, 2, ·] with 2 written, its next slot 2; example 1: refurbished
# to 1 before, history [1, 1, ·]; examples 2 and 3: nothing written.
_ROWS = layout.pack([[2, 2, 0], [1, 1, 0], [0, 0, 0], [0, 0, 0]], [2, 2, 0, 0],
                    [-1, 1, -1, -1])


def _train(active, rows=_ROWS):
  model = _model()
  received = model.get_weights()
  part = SelfieLoss(3, queue_size=3, threshold=0.05, noise_rate=0.5)
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           ClientProgram([part]), local_epochs=1)
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                  client_work.model_weights_of(model))
  result, metrics, state = train(initial, helpers.client_dataset(_X, _Y),
                                 collections.OrderedDict(selfie_rows=tf.constant(rows)),
                                 collections.OrderedDict(active=tf.constant(active, tf.float32)))
  weights = [w - u.numpy() for w, u in zip(received, result.update.trainable)]
  return weights, metrics, state['selfie_rows'].numpy()


def _ce(z, label):
  return np.log(np.exp(z).sum()) - z[label]


def test_a_refurbishing_step_by_hand():
  """Each history takes this step's prediction at slot count mod q (2, 2, 0, 0):
  example 0 becomes [2, 2, 2], F = 0 <= ε: refurbished to 2; example 1 [1, 1, 0], F =
  H(1/3, 2/3)/log 3 = 0.58: keeps its earlier 1; examples 2, 3 have [1, 0, 0] (empty slots
  vote 0), F = 0.58: not refurbished. CE against the observed labels: 2.24, 0.55, 0.24, 0.86;
  τ = 0.5 keeps the ⌈2⌉ smallest (2 and 1) as clean; clean ∪ refurbished = {0, 1, 2}, k = 3,
  targets 2, 1, 1: ℓ = (4/3)·CE(z_j, ỹ_j) there, 0 for example 3."""
  weights, metrics, rows = _train(1.0)
  np.testing.assert_array_equal(rows, layout.pack(
      [[2, 2, 2], [1, 1, 0], [1, 0, 0], [1, 0, 0]], [3, 3, 1, 1], [2, 1, -1, -1]))
  targets = {0: 2, 1: 1, 2: 1}
  expected_sum = 4 / 3 * sum(_ce(_X[j], t) for j, t in targets.items())
  assert float(metrics['loss_sum']) == pytest.approx(expected_sum, rel=1e-5)
  # Mean loss (1/3)·Σ CE(z_j, ỹ_j): ∂/∂z_j = (softmax(z_j) − onehot(ỹ_j))/3, z = x W + b.
  dz = np.zeros((4, 3))
  for j, t in targets.items():
    dz[j] = (np.exp(_X[j]) / np.exp(_X[j]).sum() - np.eye(3)[t]) / 3
  np.testing.assert_allclose(weights[0], np.eye(3) - _LR * _X.T @ dz, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(weights[1], -_LR * dz.sum(0), rtol=1e-5, atol=1e-6)


def test_warm_up_fills_the_history_and_trains_on_plain_cross_entropy():
  weights, metrics, rows = _train(0.0)
  # The same history and counts, nothing newly refurbished (example 1 keeps its old label).
  np.testing.assert_array_equal(rows, layout.pack(
      [[2, 2, 2], [1, 1, 0], [1, 0, 0], [1, 0, 0]], [3, 3, 1, 1], [-1, 1, -1, -1]))
  assert float(metrics['loss_sum']) == pytest.approx(
      sum(_ce(_X[j], _Y[j]) for j in range(4)), rel=1e-5)
  dz = (np.exp(_X) / np.exp(_X).sum(1, keepdims=True) - np.eye(3)[_Y]) / 4
  np.testing.assert_allclose(weights[0], np.eye(3) - _LR * _X.T @ dz, rtol=1e-5, atol=1e-6)


def test_the_report_scores_refurbished_labels_against_the_truth():
  # Client a: 3 refurbished (to 1, 2, 0), true 1, 2, 2: precision 2/3; its flipped examples
  # (observed ≠ true) are 0 and 2, of which 0 is refurbished to the truth. Client b: none.
  truth = diagnostics.Truth(('a', 'b'), {'a': np.array([0, 2, 1, 0]), 'b': np.array([1])},
                            {'a': np.array([1, 2, 2, 0]), 'b': np.array([1])},
                            {'a': 0.5, 'b': 0.0}, {})
  record = Refurbishment({'a': np.array([1, 2, 0, -1]), 'b': np.array([-1])})
  scored = diagnostics.score({'refurbishment': record}, truth)['refurbishment']
  assert scored == {'clients': 2, 'refurbished': 3, 'precision': pytest.approx(2 / 3),
                    'flips_corrected': pytest.approx(0.5)}
  assert diagnostics.score({'r': record}, None) == {
      'refurbishment': {'clients': 2, 'refurbished': 3}}


@pytest.mark.parametrize('params, match', [
    ({'queue_size': 0}, r'^method.params.queue_size: needs an integer >= 1, got 0$'),
    ({'threshold': 1.5}, r'^method.params.threshold: needs a number in \[0, 1\], got 1.5$'),
    ({'noise_rate': 1.0}, r'^method.params.noise_rate: needs a number in \[0, 1\), got 1.0$'),
    ({'warmup_rounds': 10}, r'^method.params.warmup_rounds: needs a number of rounds in '
                            r'\[0, fl.rounds=10\) \(or null\), got 10$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('selfie', params, rounds=10)


def test_the_defaults_are_fnbench_s():
  params = methods.resolve_params('selfie', {}, rounds=100)
  assert (params.queue_size, params.threshold, params.noise_rate, params.warmup(100),
          params.count_empty_slots) == (15, 0.05, 0.2, 20, True)
  assert methods.resolve_params('selfie', {}, rounds=4).warmup(4) == 0


def _digits(runtime='tf', **params):
  return helpers.small_digits_config('selfie', runtime, {'warmup_rounds': 1, **params},
                                     rounds=3, local_epochs=2)


def test_selfie_runs_on_digits_and_reports_its_refurbishment():
  run = helpers.run_rounds(_digits())
  assert [r['refurbishing'] for r in run.history] == [False, True, True]
  assert 'refurbishment' not in run.history[0]
  last = run.history[-1]['refurbishment']
  assert last['clients'] >= 2 and last['refurbished'] > 0
  assert 0 <= last['precision'] <= 1 and 0 <= last['flips_corrected'] <= 1
  assert np.isfinite(run.history[-1]['test_accuracy'])
  fedavg = helpers.run_rounds(helpers.small_digits_config('fedavg', rounds=3, local_epochs=2))
  assert helpers.max_difference(run.final_weights(), fedavg.final_weights()) > 1e-4
  # Its report section: one summary line, one table row (the last round's record).
  results = {'rounds': run.history}
  (line,) = RefurbishmentSection().summary(results)
  assert line.startswith(f'SELFIE refurbishment: {last["refurbished"]} labels refurbished')
  w = reporting.Writer('.')
  RefurbishmentSection().render(w, {None: {'selfie': [reporting.Run('.', 'selfie', None, 1,
                                                                    results)]}})
  assert w.lines[0] == '## SELFIE refurbishment'
  assert w.lines[-2].startswith(f'| selfie | seed 1 | 3 | {last["clients"]} |')


@pytest.mark.slow
def test_selfie_runs_equally_on_tff_and_tf():
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  assert [r['refurbishment'] for r in runs['tff'].history[1:]] == [
      r['refurbishment'] for r in runs['tf'].history[1:]]


@pytest.mark.slow
def test_a_resumed_run_keeps_the_histories_and_refurbished_labels(tmp_path):
  config = _digits()
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(1, 2))
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  assert resumed.history[-1]['refurbishment'] == whole.history[-1]['refurbishment']
