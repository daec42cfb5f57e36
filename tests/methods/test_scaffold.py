"""SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II): the control-variate steps
(NumPy and TF twins, hand-computed cases), the client kernel's corrected step, the
parameters, and digits runs (equal on tff and tf, not FedAvg, resumable, under FedDS)."""
import collections

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram, ControlVariate, CrossEntropy
from tff_noisy.ops import scaffold
from tff_noisy.ops import scaffold_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_RNG = np.random.default_rng(0)


def _arrays(*shapes):
  return [_RNG.normal(size=s).astype(np.float32) for s in shapes]


def test_the_tf_twins_equal_numpy():
  shapes = ((3, 2), (2,))
  c, ci, x, y = (_arrays(*shapes) for _ in range(4))
  for want, got in zip(scaffold.step_shift(c, ci, 0.05),
                       scaffold_tf.step_shift([tf.constant(a) for a in c],
                                              [tf.constant(a) for a in ci], 0.05)):
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
  want = scaffold.client_control_update(ci, c, x, y, 7, 0.05)
  got = scaffold_tf.client_control_update(*([tf.constant(a) for a in v] for v in (ci, c, x, y)),
                                          tf.constant(7, tf.int64), 0.05)
  for w, g in zip(want, got):
    np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)


def test_hand_computed_control_variates():
  """c_i = 1, c = 0.5, x - y = 0.6 over K = 3 steps of rate 0.1: c_i+ = 1 - 0.5 + 0.6/0.3
  = 2.5 (line 12); the server with Δc sums 1.0 over N = 4 clients: c = 0.5 + 0.25."""
  (updated,) = scaffold.client_control_update([1.0], [0.5], [2.0], [1.4], 3, 0.1)
  assert updated == pytest.approx(2.5)
  (control,) = scaffold.server_control_update([np.float32(0.5)], [np.float32(1.0)], 4)
  assert control == pytest.approx(0.75)
  (shift,) = scaffold.step_shift([0.5], [1.0], 0.1)  # -0.1 (0.5 - 1).
  assert shift == pytest.approx(0.05)


def test_one_plain_sgd_step_is_the_corrected_step_and_its_variate_the_gradient():
  """One step of rate lr: y = x - lr (g - c_i + c) (line 10), so option II's c_i+ =
  c_i - c + (x - y)/lr is the gradient g(x) itself (option I) whatever c and c_i; the
  client sends Δc_i = c_i+ - c_i."""
  lr = 0.1
  model = helpers.linear_model(4, 3)
  shapes = [v.shape for v in model.trainable_variables]
  variate = ControlVariate(shapes, lr)
  x, labels = helpers.random_client(1, 8)
  dataset = helpers.client_dataset(x, labels)
  weights = client_work.model_weights_of(model)
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()), weights)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels.astype(np.int32), logits=model(x)))
  gradient = [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]
  control = collections.OrderedDict(zip(variate.names, _arrays(*shapes)))
  state = collections.OrderedDict(zip(variate.names, _arrays(*shapes)))
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(lr),
                                           ClientProgram([CrossEntropy(), variate]),
                                           local_epochs=1)
  result, metrics, new_state = train(initial, dataset, state, control)
  for update, n, g in zip(result.update.trainable, variate.names, gradient):
    np.testing.assert_allclose(update.numpy(), lr * (g - state[n] + control[n]), rtol=1e-4,
                               atol=1e-6)  # The update is x - y.
    np.testing.assert_allclose(new_state[n].numpy(), g, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(metrics[client_work.OUTPUTS_KEY][n].numpy(), g - state[n],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('name, params, match', [
    ('scaffold', {'mu': 0.1}, r"^method.params.mu: not a parameter of 'scaffold'"),
    ('fedds_scaffold', {'em': 'remote'}, "^method.params.em: needs 'central' or 'federated'"),
])
def test_bad_parameters_are_one_line_errors(name, params, match):
  with pytest.raises(ConfigError, match=match) as raised:
    methods.resolve_params(name, params, rounds=10)
  assert '\n' not in str(raised.value)


def _digits(method, runtime='tf', rounds=2):
  return helpers.small_digits_config(method, runtime, public_fraction=0.1, rounds=rounds,
                                     local_epochs=2)


def _controls(simulation):
  return [np.asarray(v) for v in simulation.process.get_hparams(simulation.state).values()]


@pytest.mark.slow
def test_scaffold_runs_equally_on_tff_and_tf_and_is_not_fedavg():
  runs = {runtime: helpers.run_rounds(_digits('scaffold', runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  assert helpers.max_difference(_controls(runs['tff']), _controls(runs['tf'])) < 1e-4
  assert [r['test_accuracy'] for r in runs['tff'].history] == pytest.approx(
      [r['test_accuracy'] for r in runs['tf'].history], abs=1e-6)
  assert min(np.abs(c).max() for c in _controls(runs['tf'])) > 1e-3  # c moved.
  client_controls = [v for cid in runs['tf'].client_ids
                     for name, v in runs['tf'].store.to_arrays().items()
                     if name.startswith(f'{cid}/')]
  assert client_controls and any(np.abs(v).max() > 1e-3 for v in client_controls)
  fedavg = helpers.run_rounds(_digits('fedavg'))
  assert helpers.max_difference(runs['tf'].final_weights(), fedavg.final_weights()) > 1e-3


@pytest.mark.slow
def test_a_resumed_run_keeps_the_control_variates(tmp_path):
  config = _digits('scaffold', rounds=3)
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(1, 2))
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  assert helpers.max_difference(_controls(whole), _controls(resumed)) == 0


@pytest.mark.slow
def test_fedds_weighs_scaffold_clients():
  fedds = helpers.run_rounds(_digits('fedds_scaffold'))
  alone = helpers.run_rounds(_digits('scaffold'))
  record = fedds.history[-1]
  assert len(record['fedds_weights']) == 2 and 'reliabilities' in record
  assert min(np.abs(c).max() for c in _controls(fedds)) > 1e-3
  assert helpers.max_difference(fedds.final_weights(), alone.final_weights()) > 1e-4
