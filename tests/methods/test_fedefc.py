"""FedEFC's client part in the federated process: types first, then numbers.

A toy Dense model, one full-batch SGD step: stage 1 is FedAvg's update exactly and reports
the received model's accuracy on the clients' own labels; stage 2's update is one step on
the forward-corrected loss with the matrix the NumPy estimator gives on the received
model's probabilities (counts or anchors, with or without prior compensation).
"""

import types

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy.methods import recipe
from tff_noisy.methods import fedefc as fedefc_params
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.fedefc import algorithm as fedefc_lib
from tff_noisy.methods.fedefc.parts import ForwardCorrection
from tff_noisy.ops import transition
from tff_noisy.simulation import assembly
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_CLASSES = 3
_LR = 0.5


def _build(part):
  x, y = helpers.random_client(0, 4)
  return process_lib.build_process(helpers.linear_model,
                                   helpers.client_dataset(x, y).element_spec,
                                   tff.learning.optimizers.build_sgdm(_LR),
                                   program=ClientProgram([part]) if part else None)


@pytest.fixture(scope='module')
def fedefc():
  return _build(ForwardCorrection(_CLASSES))


def _start(process, model, corrected):
  state = assembly.initial_state(process, model)
  if corrected is None:  # FedAvg's process: no hparams.
    return state
  return process.set_hparams(state, dict(process.get_hparams(state), corrected=corrected))


def _expected_update(model, x, y, loss_fn):
  """Received minus trained weights after one full-batch SGD step on ``loss_fn``."""
  local = helpers.linear_model()
  local.set_weights(model.get_weights())
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(loss_fn(local(x)))
  grads = tape.gradient(loss, local.trainable_variables)
  return [_LR * g.numpy() for g in grads]


def _forward_loss(y, matrix):
  return lambda logits: -tf.math.log(
      tf.gather(tf.nn.softmax(logits) @ tf.constant(matrix.T, tf.float32), y,
                batch_dims=1) + 1e-12)


def test_type_signature(fedefc):
  signature = fedefc._next.type_signature  # pylint: disable=protected-access
  hparams = signature.parameter[0].member.client_work
  # Only the phase is broadcast; the prestopping monitor is FedEFC's server-only controller.
  assert tff.structure.name_list(hparams) == ['corrected'] and str(hparams.corrected) == 'int32'
  metrics = signature.result[1].member.client_work.train
  assert [name for name, _ in tff.structure.iter_elements(metrics.objective)] == [
      'received_accuracy', 'matrix_singular', 'matrix_clipped_columns']
  assert all(str(t) == 'float32' for _, t in tff.structure.iter_elements(metrics.objective))
  training = _build(ForwardCorrection(_CLASSES, signal='training'))
  signature = training._next.type_signature  # pylint: disable=protected-access
  names = [name for name, _ in tff.structure.iter_elements(
      signature.result[1].member.client_work.train.objective)]
  assert names == ['matrix_singular', 'matrix_clipped_columns']


@pytest.mark.slow
def test_stage_one_is_fedavg_and_reports_the_received_accuracy(fedefc):
  tf.keras.utils.set_random_seed(0)
  model = helpers.linear_model()
  (xa, ya), (xb, yb) = helpers.random_client(1, 9), helpers.random_client(2, 6)
  datasets = [helpers.client_data(xa, ya), helpers.client_data(xb, yb)]
  out = fedefc.next(_start(fedefc, model, 0), datasets, [(), ()])
  plain = _build(None)
  reference = plain.next(_start(plain, model, None), datasets, [(), ()])
  for got, want in zip(fedefc.get_model_weights(out.state).trainable,
                       plain.get_model_weights(reference.state).trainable):
    np.testing.assert_array_equal(got, want)
  accuracies = [np.mean(np.argmax(model(x).numpy(), 1) == y) for x, y in ((xa, ya), (xb, yb))]
  reported = out.metrics['client_work']['train']['objective']
  assert reported['received_accuracy'] == pytest.approx(np.mean(accuracies))  # Unweighted.
  assert reported['matrix_singular'] == 0 and reported['matrix_clipped_columns'] == 0


@pytest.mark.parametrize('estimator, prior_comp', [
    ('confident_joint', False),
    pytest.param('confident_joint', True, marks=pytest.mark.slow),
    pytest.param('anchor', False, marks=pytest.mark.slow)])
def test_stage_two_trains_on_the_clients_own_corrected_loss(estimator, prior_comp):
  part = ForwardCorrection(_CLASSES, estimator=estimator, anchor_percentile=80.0,
                           prior_comp=prior_comp)
  process = _build(part)
  tf.keras.utils.set_random_seed(1)
  model = helpers.linear_model()
  x, y = helpers.random_client(3, 40)
  y[y == 2] = 1  # No sample labelled 2: its threshold is infinite, its column clipped.
  out = process.next(_start(process, model, 1), [helpers.client_data(x, y)], [()])
  probs = tf.nn.softmax(model(x)).numpy()
  if estimator == 'anchor':
    q = transition.anchor_transition_matrix(probs, 80.0)
  else:
    q = transition.estimate_transition_matrix(probs, y)
    counts = transition.confident_joint(probs, y)
  matrix = transition.compensate_prior(q, transition.class_prior(y, _CLASSES)) \
      if prior_comp else q
  expected = _expected_update(model, x, y, _forward_loss(y, matrix))
  trained = process.get_model_weights(out.state).trainable
  for received, new, step in zip(model.get_weights(), trained, expected):
    np.testing.assert_allclose(received - new, step, rtol=2e-4, atol=1e-6)
  reported = out.metrics['client_work']['train']['objective']
  assert reported['matrix_singular'] == float(transition.is_singular(q))
  clipped = 0.0 if estimator == 'anchor' else float(np.sum(np.diag(counts) < 1))
  assert reported['matrix_clipped_columns'] == clipped
  if estimator == 'confident_joint':
    assert clipped >= 1  # Class 2 is absent.


@pytest.mark.parametrize('monitor_from, switch, best', [('code', 4, 0.55),
                                                    ('paper', 3, 0.6)])
def test_the_monitor_is_server_only_state_the_server_steps_update(monitor_from, switch,
                                                                  best):
  """FedEFC's prestopping counters live in the state's controller slot, the phase in the
  broadcast hparams; the server step's ``after`` updates both, and fires at the
  prestopping point. t_mon = 1, gamma = 1, signals 0.5, 0.6, 0.55, 0.5: ``paper`` reads
  rounds 2 on (0.6 is the best, round 3 fires); ``code`` rounds 3 on (0.55 is the best,
  round 4 fires)."""
  process = process_lib.build_process(
      helpers.linear_model, helpers.client_dataset(*helpers.random_client(0, 4)).element_spec,
      tff.learning.optimizers.build_sgdm(_LR), program=ClientProgram([ForwardCorrection(_CLASSES)]),
      controller=fedefc_lib.MONITOR)
  step = fedefc_lib.Prestopping(fedefc_params.FedEFCParams(
      t_mon=1, gamma=1, report_matrix_error=False, monitor_from=monitor_from))
  state = process.initialize()
  assert list(process.get_hparams(state)) == ['corrected']
  assert int(process.get_controller(state)['switch_round']) == -1
  for round_num, signal in enumerate([0.5, 0.6, 0.55, 0.5], start=1):
    server = recipe.ServerContext(process, None, None, None,
                                  metrics={'objective': {'received_accuracy': signal}})
    state, diagnostics = step.after(round_num, state, server)
    assert diagnostics['prestop']['monitor_from'] == monitor_from
  assert int(process.get_hparams(state)['corrected']) == 1
  monitor = process.get_controller(state)
  assert int(monitor['switch_round']) == switch and monitor['monitor_best'] == np.float32(best)
  assert monitor['monitor_best'].dtype == np.float32
  with pytest.raises(ValueError, match="controller"):
    process.set_controller(state, {'switch_round': 4})


# tau = [0.8, 0.3, 0.2, +inf]; rows 0 and 1 have two confident classes, 1 and 2: the
# likeliest of them is 1, the global argmax 3 (nobody labelled 3) and 0 (below its
# threshold). Counts C[label, guess]: ``passing`` diag(1, 2, 1, 0), ``cleanlab``
# C[0, 0] = C[1, 0] = C[1, 3] = C[2, 2] = 1 (tests/ops/test_transition.py).
_GUESS_PROBS = np.array([[0.10, 0.30, 0.20, 0.40], [0.45, 0.30, 0.20, 0.05],
                         [0.80, 0.10, 0.05, 0.05], [0.50, 0.10, 0.20, 0.20]], np.float32)
_GUESS_LABELS = np.array([1, 1, 0, 2])


@pytest.mark.parametrize('guess, clipped', [('passing', 1.0), ('cleanlab', 2.0)])
def test_the_part_estimates_with_its_guess_rule(guess, clipped):
  part = fedefc_lib.fedefc(fedefc_params.FedEFCParams(guess=guess),
                           types.SimpleNamespace(num_classes=4)).parts[0]
  assert part.guess == guess
  expected = transition.estimate_transition_matrix(_GUESS_PROBS, _GUESS_LABELS, guess=guess)
  matrix, clipped_columns, singular = part.estimate(_GUESS_PROBS, _GUESS_LABELS)
  np.testing.assert_allclose(matrix.numpy(), expected, atol=1e-7)
  assert float(clipped_columns) == clipped and float(singular) == 0.0
  # The on-device start (TFLite's) estimates the same matrix; log p as logits gives p back.
  outputs = part._device_start(  # pylint: disable=protected-access
      lambda x: x, tf.math.log(_GUESS_PROBS), _GUESS_LABELS, {'corrected': np.int32(1)})
  np.testing.assert_allclose(outputs['matrix'].numpy(), expected, atol=1e-6)
  assert not np.allclose(expected, transition.estimate_transition_matrix(
      _GUESS_PROBS, _GUESS_LABELS, guess='cleanlab' if guess == 'passing' else 'passing'))
  with pytest.raises(ValueError, match='guess must be one of passing, cleanlab'):
    ForwardCorrection(4, guess='global')
