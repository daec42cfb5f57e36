"""FedExP (Jhunjhunwala et al. 2023, Eqs. 8-10): the server step by hand on a toy model
with both anchors (the paper's θ^{t-1}, FNBench's θ^0) and against ``ops.fedexp``, the
refused server learning rate, the parameters, and digits runs (tf; equal on tff)."""
import collections
import dataclasses

import helpers
import numpy as np
import pytest

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods import recipe
from tff_noisy.methods.fedexp import algorithm as fedexp_lib
from tff_noisy.methods.fedexp import FedExPParams
from tff_noisy.ops import fedexp
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_SETUP = collections.namedtuple('Setup', 'model_fn')(lambda: helpers.linear_model(4, 3))
_RESULT = collections.namedtuple('Result', 'update update_weight')
_E = np.eye(3, dtype=np.float32)


def _weights(bias):
  return tff.learning.models.ModelWeights(
      trainable=[np.zeros((4, 3), np.float32), np.asarray(bias, np.float32)],
      non_trainable=[])


def _recipe(anchor, epsilon):
  return fedexp_lib.fedexp(FedExPParams(anchor=anchor, epsilon=epsilon), _SETUP)


def _process(recipe_value):
  x, y = helpers.random_client(0, 4)
  return process_lib.build_process(
      helpers.linear_model, helpers.client_dataset(x, y).element_spec,
      tff.learning.optimizers.build_sgdm(0.1), program=ClientProgram(recipe_value.parts),
      controller=recipe_value.controller)


@pytest.fixture(scope='module')
def initial_process():
  return _process(_recipe('initial', 0.0))


@pytest.fixture(scope='module')
def previous_process():
  return _process(_recipe('previous', 0.0))


# Round 2 of a toy run: θ^0 = 0, θ^{t-1} = D = (0.5, 0, 0) (the bias; the kernel stays 0),
# three clients of equal weight train to θ_i = 2e_i, so the aggregate is (2/3, 2/3, 2/3).
_D = np.array([0.5, 0.0, 0.0], np.float32)
_TRAINED = [2 * _E[i] for i in range(3)]


def _second_round(process, recipe_value, sizes=(5, 5, 5)):
  step = recipe_value.server[0]
  server = recipe.ServerContext(process, None, None, None)
  state = process.set_model_weights(process.initialize(), _weights(np.zeros(3)))
  state, _ = step.before(1, state, server)  # θ^0 = 0 is the model before round 1.
  state = process.set_model_weights(state, _weights(_D))
  state, _ = step.before(2, state, server)
  results = [_RESULT(_weights(_D - t), np.float32(n)) for t, n in zip(_TRAINED, sizes)]
  hook = recipe_value.weighting(2, state, ['a', 'b', 'c'], [{}, {}, {}], server)
  weights, _ = hook(results, process.get_model_weights(state))
  assert weights == list(sizes)  # The aggregator's own weights.
  mean = sum(n * t for n, t in zip(sizes, _TRAINED)) / sum(sizes)
  state = process.set_model_weights(state, _weights(mean))
  state, record = step.after(2, state, server)
  return process.get_model_weights(state), record


def test_the_initial_anchor_by_hand(initial_process):
  """FNBench's code: θ_i - θ^0 = 2e_i, Σ p_i ||·||² = 4, ||mean - θ^0||² = 3·(2/3)² = 4/3,
  ε = 0: η_g = 4 / (2·4/3) = 1.5, θ^t = θ^0 + 1.5·(2/3, 2/3, 2/3) = (1, 1, 1)."""
  weights, record = _second_round(initial_process, _recipe('initial', 0.0))
  assert record['eta_g'] == pytest.approx(1.5)
  np.testing.assert_allclose(weights.trainable[1], [1.0, 1.0, 1.0], rtol=1e-6)
  np.testing.assert_allclose(weights.trainable[0], np.zeros((4, 3)))
  assert record['fedexp']['mean_squared_norm'] == pytest.approx(4.0)
  assert record['fedexp']['squared_norm_of_mean'] == pytest.approx(4 / 3)
  model, eta = fedexp.server_update([np.zeros(3)], [[t] for t in _TRAINED], epsilon=0.0)
  assert eta == pytest.approx(1.5)
  np.testing.assert_allclose(weights.trainable[1], model[0], rtol=1e-6)


def test_the_previous_anchor_by_hand(previous_process):
  """The paper: Δ_i = θ_i - D = (1.5, 0, 0), (-0.5, 2, 0), (-0.5, 0, 2), mean of their
  squared norms (2.25 + 4.25 + 4.25)/3 = 43/12; Δ̄ = (1/6, 2/3, 2/3), ||Δ̄||² = 11/12;
  η_g = (43/12) / (2·11/12) = 43/22, θ^t = D + (43/22) Δ̄."""
  weights, record = _second_round(previous_process, _recipe('previous', 0.0))
  assert record['eta_g'] == pytest.approx(43 / 22)
  want = _D + 43 / 22 * np.array([1 / 6, 2 / 3, 2 / 3])
  np.testing.assert_allclose(weights.trainable[1], want, rtol=1e-6)
  model, eta = fedexp.server_update([_D], [[t] for t in _TRAINED], epsilon=0.0)
  assert eta == pytest.approx(43 / 22)
  np.testing.assert_allclose(weights.trainable[1], model[0], rtol=1e-6)


def test_weights_epsilon_and_a_non_finite_client(initial_process):
  """Example weights (1, 1, 2) and ε = 0.25 against ``ops.fedexp.server_update``; a
  fourth client with a non-finite update (zeros, weight 0) changes nothing."""
  recipe_value = _recipe('initial', 0.25)
  weights, record = _second_round(initial_process, recipe_value, sizes=(1, 1, 2))
  model, eta = fedexp.server_update([np.zeros(3)], [[t] for t in _TRAINED], [1, 1, 2], 0.25)
  assert record['eta_g'] == pytest.approx(eta)
  # p = (1/4, 1/4, 1/2): Σ p_i ||2e_i||² = 4, mean (0.5, 0.5, 1) of squared norm 1.5:
  # η_g = 4 / (2(1.5 + 0.25)) = 8/7.
  assert eta == pytest.approx(8 / 7)
  np.testing.assert_allclose(weights.trainable[1], model[0], rtol=1e-6)
  step = recipe_value.server[0]
  step.mean_squared_norm = None
  hook = recipe_value.weighting(2, initial_process.initialize(), [], [], recipe.ServerContext(
      initial_process, None, None, None))
  hook([_RESULT(_weights(np.ones(3)), np.float32(3)),
        _RESULT(_weights(np.zeros(3)), np.float32(0))], None)
  # The finite client alone: Δ = -1 from θ^{t-1} = D, from θ^0 = 0 (the controller of a
  # fresh state) D - 1 = (-0.5, -1, -1), of squared norm 2.25.
  assert step.mean_squared_norm == pytest.approx(2.25)


def test_the_initial_model_is_kept_once(initial_process):
  recipe_value = _recipe('initial', 1e-3)
  step = recipe_value.server[0]
  server = recipe.ServerContext(initial_process, None, None, None)
  state = initial_process.set_model_weights(initial_process.initialize(), _weights(_D))
  state, _ = step.before(1, state, server)
  state = initial_process.set_model_weights(state, _weights(np.ones(3)))
  state, _ = step.before(2, state, server)
  controller = initial_process.get_controller(state)
  assert int(controller[fedexp_lib.HAS_INITIAL]) == 1
  np.testing.assert_allclose(controller['fedexp_initial_1'], _D)


def test_a_server_learning_rate_other_than_1_is_refused():
  step = _recipe('initial', 1e-3).server[0]
  setup = collections.namedtuple('Setup', 'server_optimizer')
  step.prepare(recipe.ServerContext(None, setup(tff.learning.optimizers.build_sgdm(1.0)),
                                    None, None))
  with pytest.raises(ConfigError, match=r'^fl.server_lr: FedExP sets the server step size '
                     r'itself \(η_g\): needs 1, got 0.5$'):
    step.prepare(recipe.ServerContext(None, setup(tff.learning.optimizers.build_sgdm(0.5)),
                                      None, None))


@pytest.mark.parametrize('params, match', [
    ({'anchor': 'start'}, r"^method.params.anchor: needs 'initial' or 'previous'"),
    ({'epsilon': -1.0}, r'^method.params.epsilon: needs a number >= 0'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match) as raised:
    methods.resolve_params('fedexp', params, rounds=10)
  assert '\n' not in str(raised.value)


def _config(method, runtime, **params):
  """Three rounds of every one of 4 digits clients, each holding two label shards: their
  updates differ enough for η_g > 1."""
  config = helpers.small_digits_config(method, runtime, params, rounds=3, local_epochs=2,
                                       participation=1.0)
  return dataclasses.replace(config, partition=dataclasses.replace(
      config.partition, name='shards', shards_per_client=2))


def _run(runtime, **params):
  return driver.run_experiment(_config('fedexp', runtime, **params), None, progress=False)


def test_digits_runs_record_eta_and_are_not_fedavg(tmp_cache):
  """Both anchors agree in round 1 (θ^{t-1} = θ^0 there) and extrapolate; from θ^0 the
  updates' shared drift θ^{t-1} - θ^0 dominates afterwards (η_g near or at 1), from
  θ^{t-1} they keep extrapolating."""
  del tmp_cache
  runs = {anchor: _run('tf', anchor=anchor) for anchor in ('initial', 'previous')}
  etas = {anchor: [r['eta_g'] for r in run.rounds] for anchor, run in runs.items()}
  assert etas['initial'][0] == pytest.approx(etas['previous'][0], rel=1e-6)
  assert etas['initial'][0] > 1.0 and min(etas['previous']) > 1.0, etas
  assert all(eta >= 1.0 for eta in etas['initial']), etas
  fedavg = driver.run_experiment(_config('fedavg', 'tf'), None, progress=False)
  for run in runs.values():
    assert helpers.max_difference(run.final_weights, fedavg.final_weights) > 1e-3
  assert runs['initial'].rounds[-1]['test_accuracy'] > 0.3


@pytest.mark.slow
def test_digits_runs_are_equal_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: _run(runtime) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights, runs['tf'].final_weights) < 1e-5
  for want, got in zip(runs['tff'].rounds, runs['tf'].rounds):
    assert got['eta_g'] == pytest.approx(want['eta_g'], rel=1e-5)
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-6)


@pytest.mark.slow
def test_a_resumed_run_extrapolates_from_the_same_initial_model(tmp_path, tmp_cache):
  """θ^0 lives in the controller: a run restarted after rounds 1 and 2 takes the same
  η_g and ends on the uninterrupted run's model, to the bit."""
  del tmp_cache
  config = _config('fedexp', 'tf')
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(1, 2))
  assert [r['eta_g'] for r in whole.history] == [r['eta_g'] for r in resumed.history]
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0


def test_a_run_with_another_server_learning_rate_stops_before_round_1(tmp_cache):
  del tmp_cache
  config = helpers.small_digits_config('fedexp', 'tf', server_lr=0.5)
  with pytest.raises(ConfigError, match=r'^fl.server_lr: FedExP sets'):
    driver.run_experiment(config, None, progress=False)
