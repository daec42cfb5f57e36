"""FedELC (Jiang et al. 2024) as a method: its client part is the shared label-correction
part with ``ops.fedelc``'s loss (checked on one noisy client's round of a toy linear model
against the NumPy maths: PENCIL's loss, the label step after the batch, the merge, no
pre-merge), its weighting is FedAvg's until detection and DaAgg's after it, its
parameters' errors, and a digits run through the driver (tf; equal on tff, slow)."""
import collections
import types

import helpers
import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods import label_correction
from tff_noisy.methods.fedelc import algorithm
from tff_noisy.ops import fedelc
from tff_noisy.ops import label_distribution as ld
from tff_noisy.ops import label_distribution_tf as ld_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_CLASSES, _LR = 3, 0.5


def _params(**overrides):
  return methods.resolve_params('fedelc', overrides, rounds=100)


def test_the_part_is_pencil_s_loss_without_mask_or_pre_merge():
  part = algorithm.loss_part(_params(), _CLASSES)
  assert isinstance(part, label_correction.MaskedOptimLoss)
  args = fedelc.loss_args()
  assert {k: part.loss_args[k] for k in args} == args
  assert (part.zeta, part.label_lr, part.label_scale) == (1.0, fedelc.LABEL_LR, 10.0)
  assert args == dict(alpha=0.5, beta=0.2, mask=False, variant='code')


def test_a_noisy_client_s_round_by_the_numpy_maths():
  """One full batch, one SGD step: the update is lr ∇ mean FedELC loss (not scaled: ζ = 1);
  the label logits take ỹ − λ ∇_ỹ (``fedelc.label_gradient``) at the received model, then
  merge with the trained model's probabilities, K (P + softmax(ỹ)) / 2."""
  x, y = helpers.random_client(6, 9, classes=_CLASSES)
  label_lr = 100.0
  part = algorithm.loss_part(_params(label_lr=label_lr), _CLASSES)
  program = ClientProgram([part])
  model = helpers.linear_model(4, _CLASSES)
  received = [v.numpy() for v in model.trainable_variables]
  state = program.initial_state(y)
  state[label_correction.NOISY] = np.int32(1)
  rows = state[label_correction.LABEL_LOGITS]
  rows[0] = [1.0, 2.0, 0.5]  # A row away from K·onehot: the KL term has a gradient there.
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           program, local_epochs=1)
  initial = client_work.model_weights_of_values([tf.constant(w) for w in received], [])
  result, metrics, new_state = train(initial, helpers.client_dataset(x, y), state, {})
  weights = [tf.Variable(w) for w in received]
  with tf.GradientTape() as tape:
    z = tf.constant(x) @ weights[0] + weights[1]
    loss = tf.reduce_mean(ld_tf.label_distribution_loss(y, z, tf.constant(rows),
                                                        **fedelc.loss_args()))
  logits = x @ received[0] + received[1]
  assert float(loss) == pytest.approx(fedelc.fedelc_loss(logits, rows, y).mean(), rel=1e-5)
  for update, gradient in zip(result.update.trainable, tape.gradient(loss, weights)):
    np.testing.assert_allclose(update.numpy(), _LR * gradient.numpy(), rtol=1e-4, atol=1e-6)
  trained = [w - u.numpy() for w, u in zip(received, result.update.trainable)]
  stepped = rows - label_lr * fedelc.label_gradient(logits, rows, y)
  merged = ld.merge_label_logits(
      stepped, scipy.special.softmax(x @ trained[0] + trained[1], axis=1), 10.0)
  np.testing.assert_allclose(new_state[label_correction.LABEL_LOGITS], merged, rtol=1e-4,
                             atol=1e-4)
  assert int(new_state[label_correction.NOISY]) == 1
  assert float(metrics['objective']['noisy_client']) == 1.0


def _results(sizes, seed=0):
  rng = np.random.default_rng(seed)
  return [types.SimpleNamespace(update_weight=np.float32(n),
                                update=[rng.normal(size=(3, 2)), rng.normal(size=2)])
          for n in sizes]


def test_fedavg_until_detection_then_daagg():
  stages = algorithm.TwoStages(_params(warmup_rounds=4), label_correction.NOISY)
  states = [collections.OrderedDict(noisy=np.int32(f)) for f in (0, 1, 0)]
  ids = ['a', 'b', 'c']
  assert stages(4, None, ids, states, None) is None  # The aggregator's own weights.
  weigh = stages(5, None, ids, states, None)
  results = _results([10, 20, 30])
  weights, diagnostics = weigh(results, None)
  want = fedelc.aggregation_weights([10, 20, 30], [False, True, False],
                                    [r.update for r in results], detected=True)
  np.testing.assert_allclose(weights, want.weights)
  assert weights[1] < 20 / 60  # The noisy client weighs less than its examples.
  assert diagnostics['daagg']['status'] == want.status
  assert diagnostics['daagg_weights'].weights == pytest.approx(dict(zip(ids, want.weights)))


@pytest.mark.parametrize('params, match', [
    ({'warmup_rounds': 100}, r'^method.params.warmup_rounds: needs a round before the last '
                             r'\(fl.rounds=100\): detection runs after it, got 100$'),
    ({'warmup_rounds': 0}, r'^method.params.warmup_rounds: needs an integer >= 1, got 0$'),
    ({'alpha': -1.0}, r'^method.params.alpha: needs a number >= 0, got -1.0$'),
    ({'beta': -0.2}, r'^method.params.beta: needs a number >= 0, got -0.2$'),
    ({'label_lr': 0}, r'^method.params.label_lr: needs a number > 0, got 0$'),
    ({'label_scale': 0}, r'^method.params.label_scale: needs a number > 0, got 0$'),
    ({'gmm_fits': 0}, r'^method.params.gmm_fits: needs an integer >= 1, got 0$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('fedelc', params, rounds=100)


def _digits(runtime='tf'):
  return helpers.small_digits_config('fedelc', runtime, dict(warmup_rounds=2), rounds=4,
                                     participation=1.0)


def _check_run(simulation):
  rounds = simulation.history
  assert all('detection' not in r and 'daagg' not in r for r in rounds[:2])
  found = rounds[2]['detection']
  assert found['status'] == 'ok' and found['probed_clients'] == 4
  flagged = found['flagged']
  for record in rounds[2:]:
    assert record['noisy_clients'] == flagged
    truth = record['detection_truth']
    assert truth['truly_noisy'] == 2 and truth['flagged'] == len(flagged)
    assert sum(record['daagg_weights'].values()) == pytest.approx(1.0)
    if 0 < len(flagged) < 4:  # A clean and a noisy client in the round: DaAgg's weights.
      assert record['daagg']['status'] == 'ok'
      assert sum(record['daagg_weights'][c] for c in flagged) < len(flagged) / 4
    accuracy = record['label_estimate_accuracy']
    assert set(accuracy['per_client']) == set(flagged)
    assert 0 <= accuracy['accuracy'] <= 1
  return flagged


def test_a_digits_run_detects_corrects_and_weighs(tmp_cache):
  del tmp_cache
  simulation = helpers.run_rounds(_digits())
  flagged = _check_run(simulation)
  assert flagged  # Two clients with 40% symmetric noise after two rounds.
  for cid in flagged:
    logits = np.asarray(simulation.store.get(cid, 'objective.label_logits'))
    np.testing.assert_allclose(logits.sum(axis=1), 10.0, rtol=1e-5)  # Merged: K per row.


@pytest.mark.slow
def test_fedelc_runs_equally_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  _check_run(runs['tff'])
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-4
  for want, got in zip(runs['tff'].history, runs['tf'].history):
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-4)
    assert got.get('noisy_clients') == want.get('noisy_clients')
