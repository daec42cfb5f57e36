"""Ditto as FedEFC's code runs it ("FedDitto"): CE + λ||θ - w^t||² at every step, whose
gradient 2λ(θ - w^t) is FedProx's term of strength 2λ; two steps by hand on a toy model,
the parameters (the personalised variant refused), and digits runs (tf, FedProx with
μ = 2λ to the bit; equal on tff)."""
import collections

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.ditto import algorithm as ditto_lib
from tff_noisy.methods.ditto import DittoParams
from tff_noisy.ops import ditto
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5


def test_two_steps_by_hand_pull_towards_the_received_model():
  """One example of a 1-input, 2-class model with zero weights: p = (1/2, 1/2), so the
  cross-entropy's gradient is x(p - e_y) on the kernel, p - e_y on the bias. Label 0,
  x = 2: kernel gradient (-1, 1), bias (-1/2, 1/2). Step 1 (θ = w^t, no pull):
  kernel (0.5, -0.5), bias (0.25, -0.25). Step 2 on the same example, now
  z = 2·(0.5, -0.5) + (0.25, -0.25) = (1.25, -1.25): p_0 = σ(2.5), the CE gradient is
  (p_0 - 1)·(2, 1) on (kernel_0, bias_0) and its negative on class 1, plus
  2λ(θ - w^t) = 0.2·θ with λ = 0.1."""
  recipe_value = ditto_lib.ditto(DittoParams(lam=0.1), None)
  model = tf.keras.Sequential([tf.keras.layers.Input((1,)),
                               tf.keras.layers.Dense(2, name='logits',
                                                     kernel_initializer='zeros')])
  train = client_work.build_local_training(
      model, tff.learning.optimizers.build_sgdm(_LR), ClientProgram(recipe_value.parts),
      local_epochs=2)
  received = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                   client_work.model_weights_of(model))
  dataset = helpers.client_dataset(np.array([[2.0]], np.float32), np.array([0]))
  result, _, _ = train(received, dataset, (), collections.OrderedDict())
  kernel, bias = np.array([[0.5, -0.5]]), np.array([0.25, -0.25])
  p0 = 1.0 / (1.0 + np.exp(-2.5))
  ce_kernel = np.array([[(p0 - 1) * 2, (1 - p0) * 2]])
  ce_bias = np.array([p0 - 1, 1 - p0])
  pull = ditto.fedefc_proximal_gradient([kernel, bias], [np.zeros((1, 2)), np.zeros(2)], 0.1)
  np.testing.assert_allclose(pull[1], 0.2 * bias)
  want = [kernel - _LR * (ce_kernel + pull[0]), bias - _LR * (ce_bias + pull[1])]
  for update, w in zip(result.update.trainable, want):
    np.testing.assert_allclose(-update.numpy(), w, rtol=1e-5, atol=1e-6)


def test_the_recipe_is_fedprox_with_mu_2_lambda_on_devices_and_stacked():
  program = ClientProgram(ditto_lib.ditto(DittoParams(lam=0.3), None).parts)
  assert [type(p).__name__ for p in program.parts] == ['CrossEntropy', 'Proximal']
  assert program.parts[1].mu == pytest.approx(0.6)
  assert not program.device_reason() and not program.unstackable_reason()
  assert not methods.METHODS['ditto'].off_device


@pytest.mark.parametrize('params, match', [
    ({'variant': 'paper'}, r"^method.params.variant: needs 'fedefc' \(the paper's "
                           r'personalised Ditto.*is not available\), got'),
    ({'lam': 0.0}, r'^method.params.lam: needs a number > 0'),
    ({'mu': 0.1}, r"^method.params.mu: not a parameter of 'ditto'"),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match) as raised:
    methods.resolve_params('ditto', params, rounds=10)
  assert '\n' not in str(raised.value)


def _run(method, runtime, **params):
  config = helpers.small_digits_config(method, runtime, params, rounds=3, local_epochs=2)
  return driver.run_experiment(config, None, progress=False)


def test_a_digits_run_is_fedprox_with_mu_2_lambda_and_not_fedavg(tmp_cache):
  del tmp_cache
  results = _run('ditto', 'tf', lam=0.1)
  fedprox = _run('fedprox', 'tf', mu=0.2)
  fedavg = _run('fedavg', 'tf')
  assert helpers.max_difference(results.final_weights, fedprox.final_weights) == 0
  assert helpers.max_difference(results.final_weights, fedavg.final_weights) > 1e-4
  assert results.rounds[-1]['test_accuracy'] > 0.3


@pytest.mark.slow
def test_digits_runs_are_equal_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: _run('ditto', runtime) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights, runs['tf'].final_weights) < 1e-5
  for want, got in zip(runs['tff'].rounds, runs['tf'].rounds):
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-6)
