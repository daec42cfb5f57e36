"""ELR (Liu et al. 2020) as a method: the client part's step by hand on a toy model (targets
updated before the loss, then written back), two local epochs, the parameters, and digits
runs (tf, not FedAvg; equal on tff, slow)."""
import collections

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.methods.elr.parts import ELRTerm, ROWS
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR, _BETA, _LAMBDA = 0.5, 0.7, 3.0


def _model():
  """Two inputs, two classes, W = I and b = 0: the logits are the inputs."""
  model = helpers.linear_model(2, 2)
  model.set_weights([np.eye(2, dtype=np.float32), np.zeros(2, np.float32)])
  return model


_X = np.array([[1, 0], [0, 2]], np.float32)
_Y = np.array([0, 0])


def _train(rows, local_epochs=1):
  model = _model()
  received = model.get_weights()
  train = client_work.build_local_training(
      model, tff.learning.optimizers.build_sgdm(_LR),
      ClientProgram([CrossEntropy(), ELRTerm(2, _BETA, _LAMBDA)]), local_epochs=local_epochs)
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                  client_work.model_weights_of(model))
  result, metrics, state = train(initial, helpers.client_dataset(_X, _Y),
                                 collections.OrderedDict({ROWS: tf.constant(rows)}),
                                 collections.OrderedDict())
  weights = [w - u.numpy() for w, u in zip(received, result.update.trainable)]
  return weights, metrics, state[ROWS].numpy()


def _sgd(weights, targets):
  """One step on mean_i [CE(y_i, p_i) + λ log(1 − ⟨t'_i, p_i⟩)], t' = β t + (1 − β) p̂ at
  ``weights`` (no clamp needed: every p is inside [1e-4, 1 − 1e-4] here)."""
  variables = [tf.Variable(w) for w in weights]
  with tf.GradientTape() as tape:
    p = tf.nn.softmax(_X @ variables[0] + variables[1])
    new = _BETA * targets + (1 - _BETA) * tf.stop_gradient(p)
    loss = tf.reduce_mean(-tf.math.log(p[:, 0])
                          + _LAMBDA * tf.math.log(1 - tf.reduce_sum(new * p, axis=1)))
  grads = tape.gradient(loss, variables)
  return [w - _LR * g.numpy() for w, g in zip(weights, grads)], loss.numpy(), new.numpy()


def test_a_step_by_hand():
  """From t = 0 the targets become 0.3·p: p = softmax(x) = (e, 1)/(1 + e) for example 0 and
  (1, e²)/(1 + e²) for example 1; the step trains on CE + 3·log(1 − ⟨t', p⟩) and the rows
  take t'."""
  weights, metrics, rows = _train(np.zeros((2, 2), np.float32))
  expected, loss, new = _sgd(_model().get_weights(), np.zeros((2, 2), np.float32))
  p = np.array([[np.e, 1], [1, np.e ** 2]]) / np.array([[1 + np.e], [1 + np.e ** 2]])
  np.testing.assert_allclose(new, 0.3 * p, rtol=1e-6)
  np.testing.assert_allclose(rows, 0.3 * p, rtol=1e-6)
  for got, want in zip(weights, expected):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  assert float(metrics['loss_sum']) == pytest.approx(2 * loss, rel=1e-5)  # B·(batch mean).
  # The regulariser moved the step: plain cross-entropy gives other weights.
  model = _model()
  ce = [tf.Variable(w) for w in model.get_weights()]
  with tf.GradientTape() as tape:
    l_ce = tf.reduce_mean(-tf.nn.log_softmax(_X @ ce[0] + ce[1])[:, 0])
  plain = [w.numpy() - _LR * g.numpy() for w, g in zip(ce, tape.gradient(l_ce, ce))]
  assert helpers.max_difference(weights, plain) > 1e-3


def test_stored_targets_enter_the_momentum_and_persist_over_epochs():
  """Rows (0.5, 0.5) and (0, 1): t' = 0.7·t + 0.3·p before the first step; epoch 2 moves
  them again from the first step's weights: t'' = 0.7·t' + 0.3·p⁽²⁾."""
  start = np.array([[0.5, 0.5], [0.0, 1.0]], np.float32)
  weights, _, rows = _train(start, local_epochs=2)
  first, _, t1 = _sgd(_model().get_weights(), start)
  second, _, t2 = _sgd(first, t1)
  for got, want in zip(weights, second):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(rows, t2, rtol=1e-5)
  assert not np.allclose(t1, t2)


def test_the_part_starts_from_zero_targets():
  assert not ELRTerm(3).initial_state(np.array([0, 2, 1]))[ROWS].any()
  assert ELRTerm(3).initial_state(np.array([0, 2, 1]))[ROWS].shape == (3, 3)


@pytest.mark.parametrize('params, match', [
    ({'beta': 1.0}, r'^method.params.beta: needs a number in \[0, 1\), got 1.0$'),
    ({'beta': -0.1}, r'^method.params.beta: needs a number in \[0, 1\), got -0.1$'),
    ({'lambda_elr': -1}, r'^method.params.lambda_elr: needs a number >= 0, got -1$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('elr', params, rounds=10)


def test_the_defaults_are_the_authors_cifar10_config():
  params = methods.resolve_params('elr', {}, rounds=100)
  assert (params.beta, params.lambda_elr) == (0.7, 3.0)


def _digits(runtime='tf'):
  return helpers.small_digits_config('elr', runtime, {}, rounds=3, local_epochs=2)


def test_elr_runs_on_digits_and_is_not_fedavg():
  run = helpers.run_rounds(_digits())
  assert np.isfinite(run.history[-1]['test_accuracy'])
  fedavg = helpers.run_rounds(helpers.small_digits_config('fedavg', rounds=3, local_epochs=2))
  assert helpers.max_difference(run.final_weights(), fedavg.final_weights()) > 1e-4
  # λ = 0 leaves the cross-entropy alone: FedAvg's weights (the targets still move).
  zero = helpers.run_rounds(helpers.small_digits_config('elr', 'tf', {'lambda_elr': 0.0},
                                                        rounds=3, local_epochs=2))
  assert helpers.max_difference(zero.final_weights(), fedavg.final_weights()) < 1e-5


@pytest.mark.slow
def test_elr_runs_equally_on_tff_and_tf():
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
