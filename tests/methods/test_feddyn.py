"""FedDyn (Acar et al. 2021, Algorithm 1) and FedEFC's code's FedDyn: the client parts'
states and sends by hand on a toy model, the server corrections by hand and against the
per-client forms of ``ops.feddyn``, the equal weights, the parameters, and digits runs
(tf; equal on tff)."""
import collections

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.methods import recipe
from tff_noisy.methods.feddyn import algorithm as feddyn_lib
from tff_noisy.methods.feddyn import FedDynParams
from tff_noisy.methods.feddyn import parts as feddyn_parts
from tff_noisy.ops import feddyn
from tff_noisy.simulation import driver
from tff_noisy.simulation import rounds
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.1
_RNG = np.random.default_rng(0)
_SETUP = collections.namedtuple('Setup', 'model_fn')(lambda: helpers.linear_model(4, 3))


def _arrays(shapes):
  return [_RNG.normal(size=s).astype(np.float32) for s in shapes]


def _one_step(part, state, x, labels):
  """One plain-SGD step of rate _LR on one batch: (received, result, metrics, new state,
  the cross-entropy gradient at the received weights)."""
  model = helpers.linear_model(4, 3)
  weights = client_work.model_weights_of(model)
  received = tf.nest.map_structure(lambda v: tf.constant(v.numpy()), weights)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels.astype(np.int32), logits=model(x)))
  gradient = [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           ClientProgram([CrossEntropy(), part]),
                                           local_epochs=1)
  result, metrics, new_state = train(received, helpers.client_dataset(x, labels), state,
                                     collections.OrderedDict())
  return received, result, metrics, new_state, gradient


def test_fedefc_clients_train_plain_and_keep_the_sum_of_their_drifts():
  """FedEFC's code: no term in the step, so the update θ^{t-1} - θ_k is lr·g (one SGD
  step); c_k <- c_k + θ^{t-1} - θ_k = c_k + lr·g, sent whole."""
  x, labels = helpers.random_client(1, 8)
  part = feddyn_parts.DriftSum([(4, 3), (3,)])
  state = collections.OrderedDict(zip(part.names, _arrays([(4, 3), (3,)])))
  _, result, metrics, new_state, gradient = _one_step(part, state, x, labels)
  sent = metrics[client_work.OUTPUTS_KEY]
  for update, name, g in zip(result.update.trainable, part.names, gradient):
    np.testing.assert_allclose(update.numpy(), _LR * g, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(new_state[name].numpy(), state[name] + _LR * g, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(sent[name].numpy(), new_state[name].numpy())
  assert part.initial_state(None)[part.names[0]].shape == (4, 3)


def test_paper_clients_step_with_minus_g_k_and_send_the_change_of_g_k():
  """Algorithm 1, one SGD step from θ^{t-1}: the term -g_k + α(θ - θ^{t-1}) is -g_k there,
  so θ_k = θ^{t-1} - lr(g - g_k); g_k+ = g_k - α(θ_k - θ^{t-1}) = g_k + α·lr(g - g_k);
  the client sends Δg_k = α·lr(g - g_k)."""
  alpha = 0.5
  x, labels = helpers.random_client(2, 8)
  part = feddyn_parts.DynamicRegulariser([(4, 3), (3,)], alpha)
  state = collections.OrderedDict(zip(part.names, _arrays([(4, 3), (3,)])))
  _, result, metrics, new_state, gradient = _one_step(part, state, x, labels)
  for update, name, g in zip(result.update.trainable, part.names, gradient):
    np.testing.assert_allclose(update.numpy(), _LR * (g - state[name]), rtol=1e-5, atol=1e-6)
    want = state[name] + alpha * _LR * (g - state[name])
    np.testing.assert_allclose(new_state[name].numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics[client_work.OUTPUTS_KEY][name].numpy(),
                               want - state[name], rtol=1e-4, atol=1e-6)


def test_paper_clients_second_step_feels_the_pull_to_the_received_model():
  """Two SGD steps on the same batch against ``ops.feddyn.gradient_terms``: the second
  step's term -g_k + α(θ_1 - θ^{t-1}) is not -g_k alone."""
  alpha = 2.0
  x, labels = helpers.random_client(3, 8)
  part = feddyn_parts.DynamicRegulariser([(4, 3), (3,)], alpha)
  g_k = _arrays([(4, 3), (3,)])
  model = helpers.linear_model(4, 3)
  received = [v.numpy() for v in model.trainable_variables]
  theta = [r.copy() for r in received]
  for _ in range(2):
    for v, t in zip(model.trainable_variables, theta):
      v.assign(t)
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=labels.astype(np.int32), logits=model(x)))
    grads = [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]
    terms = feddyn.gradient_terms(theta, received, g_k, alpha)
    theta = [t - _LR * (g + s) for t, g, s in zip(theta, grads, terms)]
  for v, r in zip(model.trainable_variables, received):
    v.assign(r)
  train = client_work.build_local_training(
      model, tff.learning.optimizers.build_sgdm(_LR), ClientProgram([CrossEntropy(), part]),
      local_epochs=2)
  state = collections.OrderedDict(zip(part.names, g_k))
  received_weights = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                           client_work.model_weights_of(model))
  result, _, new_state = train(received_weights, helpers.client_dataset(x, labels), state,
                               collections.OrderedDict())
  for update, r, t in zip(result.update.trainable, received, theta):
    np.testing.assert_allclose(update.numpy(), r - t, rtol=1e-4, atol=1e-6)
  for name, g, want in zip(part.names, g_k,
                           feddyn.client_state_update(g_k, received, theta, alpha)):
    np.testing.assert_allclose(new_state[name].numpy(), want, rtol=1e-4, atol=1e-5)


def _process(recipe_value):
  x, y = helpers.random_client(0, 4)
  return process_lib.build_process(
      helpers.linear_model, helpers.client_dataset(x, y).element_spec,
      tff.learning.optimizers.build_sgdm(_LR), program=ClientProgram(recipe_value.parts),
      controller=recipe_value.controller)


def _weights(kernel, bias):
  return tff.learning.models.ModelWeights(
      trainable=[np.full((4, 3), kernel, np.float32), np.full((3,), bias, np.float32)],
      non_trainable=[])


@pytest.fixture(scope='module')
def fedefc_process():
  return _process(feddyn_lib.feddyn(FedDynParams(mu=0.01), _SETUP))


@pytest.fixture(scope='module')
def paper_process():
  return _process(feddyn_lib.feddyn(FedDynParams(variant='paper', alpha=0.5), _SETUP))


def test_the_fedefc_server_subtracts_mu_times_the_summed_drifts(fedefc_process):
  """θ^{t-1} = 1 (kernel), 2 (bias); the unweighted mean 1.5, 1.0; Σ c_k = 100, -200 and
  μ = 0.01: θ^t = 1.5 - 1 = 0.5 and 1.0 + 2 = 3.0."""
  process = fedefc_process
  step = feddyn_lib.feddyn(FedDynParams(mu=0.01), _SETUP).server[0]
  state = process.set_model_weights(process.initialize(), _weights(1.0, 2.0))
  state, _ = step.before(1, state, recipe.ServerContext(process, None, None, None))
  state = process.set_model_weights(state, _weights(1.5, 1.0))
  outputs = {step.names[0]: np.full((4, 3), 100.0, np.float32),
             step.names[1]: np.full((3,), -200.0, np.float32)}
  state, record = step.after(1, state, recipe.ServerContext(process, None, None, None,
                                                            outputs=outputs))
  kernel, bias = process.get_model_weights(state).trainable
  np.testing.assert_allclose(kernel, np.full((4, 3), 0.5), rtol=1e-6)
  np.testing.assert_allclose(bias, np.full(3, 3.0), rtol=1e-6)
  assert kernel.dtype == np.float32
  assert record['feddyn']['correction_norm'] == pytest.approx(
      0.01 * np.sqrt(12 * 100.0**2 + 3 * 200.0**2))


def test_the_paper_server_keeps_h_over_all_clients(paper_process):
  """h^{t-1} = 0 then: Σ Δg_k = 0.6 (kernel), -0.3 (bias) over m = 3 clients gives
  h = 0.2, -0.1; α = 0.5: θ^t = mean - h/α = 1.5 - 0.4 = 1.1 and 1.0 + 0.2 = 1.2. A second
  round with the same sums: h = 0.4, -0.2, θ^t = 1.5 - 0.8 = 0.7 and 1.0 + 0.4 = 1.4."""
  process = paper_process
  step = feddyn_lib.feddyn(FedDynParams(variant='paper', alpha=0.5), _SETUP).server[0]
  data = collections.namedtuple('Data', 'client_ids')(['a', 'b', 'c'])
  step.prepare(recipe.ServerContext(process, None, data, None))
  state = process.initialize()
  outputs = {step.names[0]: np.full((4, 3), 0.6, np.float32),
             step.names[1]: np.full((3,), -0.3, np.float32)}
  for want_h, want in (((0.2, -0.1), (1.1, 1.2)), ((0.4, -0.2), (0.7, 1.4))):
    state = process.set_model_weights(state, _weights(1.5, 1.0))
    state, record = step.after(1, state, recipe.ServerContext(process, None, data, None,
                                                              outputs=outputs))
    kernel, bias = process.get_model_weights(state).trainable
    np.testing.assert_allclose(kernel, np.full((4, 3), want[0]), rtol=1e-6)
    np.testing.assert_allclose(bias, np.full(3, want[1]), rtol=1e-6)
    h = process.get_controller(state)
    np.testing.assert_allclose(h['feddyn_h_0'], np.full((4, 3), want_h[0]), rtol=1e-6)
    np.testing.assert_allclose(h['feddyn_h_1'], np.full(3, want_h[1]), rtol=1e-6)
  assert record['feddyn']['h_norm'] == pytest.approx(np.sqrt(12 * 0.16 + 3 * 0.04))


def _round(process, recipe_value, num_clients, sizes=(3, 9)):
  """One round of two clients of ``sizes`` examples through the recipe's weighting and
  server step: (θ^{t-1}, their θ_k and new states, θ^t, h^t or None)."""
  step = recipe_value.server[0]
  data = collections.namedtuple('Data', 'client_ids')([str(i) for i in range(num_clients)])
  step.prepare(recipe.ServerContext(process, None, data, None))
  datasets = [helpers.client_data(*helpers.random_client(10 + i, n), batch_size=4)
              for i, n in enumerate(sizes)]
  states = [process.program.initial_state(None) for _ in sizes]
  for s in states:
    for name in s:
      s[name] = _RNG.normal(size=s[name].shape).astype(np.float32)
  state = process.initialize()
  state, _ = step.before(1, state, recipe.ServerContext(process, None, data, None))
  received = [np.asarray(w) for w in process.get_model_weights(state).trainable]
  results, _, new_states = process.train_clients(
      process.get_model_weights(state), process.get_hparams(state), datasets, states)
  trained = [[r - np.asarray(u) for r, u in zip(received, res.update.trainable)]
             for res in results]
  hook = recipe_value.weighting(1, state, list(data.client_ids[:2]), states, None)
  assert hook(results, None)[0] == [1.0, 1.0]  # Not the clients' 3 and 9 examples.
  output = process.next(state, datasets, states, aggregation_weights=hook)
  state, _ = step.after(1, output.state, recipe.ServerContext(
      process, None, data, None, outputs=rounds.client_outputs(output.metrics)))
  model = [np.asarray(w) for w in process.get_model_weights(state).trainable]
  return received, trained, new_states, states, model, state


def test_the_fedefc_round_is_the_per_client_rule_of_ops(fedefc_process):
  """The weighting, the clients and the server step together equal
  ``ops.feddyn.fedefc_server_model`` on the clients' θ_k and new c_k."""
  recipe_value = feddyn_lib.feddyn(FedDynParams(mu=0.05), _SETUP)
  received, trained, new_states, old_states, model, _ = _round(fedefc_process, recipe_value, 4)
  names = recipe_value.parts[1].names
  controls = [[np.asarray(s[n]) for n in names] for s in new_states]
  for c, old, t in zip(controls, old_states, trained):  # c_k + θ^{t-1} - θ_k.
    np.testing.assert_allclose(c[0], old[names[0]] + received[0] - t[0], rtol=1e-5, atol=1e-6)
  for got, want in zip(model, feddyn.fedefc_server_model(trained, controls, 0.05)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_paper_round_is_algorithm_1_of_ops(paper_process):
  """The same for Algorithm 1: ``ops.feddyn.server_state_update`` then ``server_model``
  on the clients' θ_k (m = 5 clients, 2 of them in the round)."""
  recipe_value = feddyn_lib.feddyn(FedDynParams(variant='paper', alpha=0.5), _SETUP)
  received, trained, _, _, model, state = _round(paper_process, recipe_value, 5)
  h = feddyn.server_state_update([np.zeros_like(r) for r in received], received, trained,
                                 0.5, 5)
  controller = paper_process.get_controller(state)
  for i, want in enumerate(h):
    np.testing.assert_allclose(controller[f'feddyn_h_{i}'], want, rtol=1e-4, atol=1e-6)
  for got, want in zip(model, feddyn.server_model(trained, h, 0.5)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_non_finite_client_weighs_nothing():
  hook = feddyn_lib.equal_weights(1, None, ['a', 'b'], [{}, {}], None)
  result = collections.namedtuple('Result', 'update update_weight')
  assert hook([result(None, 0.0), result(None, 7.0)], None)[0] == [0.0, 1.0]


@pytest.mark.parametrize('params, match', [
    ({'variant': 'acar'}, r"^method.params.variant: needs 'fedefc' or 'paper'"),
    ({'mu': -1.0}, r'^method.params.mu: needs a number >= 0'),
    ({'alpha': 0.0}, r'^method.params.alpha: needs a number > 0'),
    ({'lam': 0.1}, r"^method.params.lam: not a parameter of 'feddyn'"),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match) as raised:
    methods.resolve_params('feddyn', params, rounds=10)
  assert '\n' not in str(raised.value)


def _run(runtime, **params):
  config = helpers.small_digits_config('feddyn', runtime, params, rounds=3, local_epochs=2)
  return driver.run_experiment(config, None, progress=False)


def _fedavg():
  config = helpers.small_digits_config('fedavg', 'tf', rounds=3, local_epochs=2)
  return driver.run_experiment(config, None, progress=False)


@pytest.mark.parametrize('variant', ['fedefc', 'paper'])
def test_digits_runs_learn_and_are_not_fedavg(tmp_cache, variant):
  del tmp_cache
  results = _run('tf', variant=variant, mu=1e-2)
  fedavg = _fedavg()
  key = 'correction_norm' if variant == 'fedefc' else 'h_norm'
  assert all(r['feddyn'][key] > 0 for r in results.rounds)
  assert results.rounds[-1]['test_accuracy'] > 0.3  # Ten classes: chance is 0.1.
  assert helpers.max_difference(results.final_weights, fedavg.final_weights) > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize('variant', ['fedefc', 'paper'])
def test_digits_runs_are_equal_on_tff_and_tf(tmp_cache, variant):
  del tmp_cache
  runs = {runtime: _run(runtime, variant=variant, mu=1e-2) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights, runs['tf'].final_weights) < 1e-5
  for want, got in zip(runs['tff'].rounds, runs['tf'].rounds):
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-6)
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize('variant', ['fedefc', 'paper'])
def test_a_resumed_run_keeps_the_client_states_and_h(tmp_path, tmp_cache, variant):
  """The clients' c_k or g_k live in the store, h in the controller: a run restarted after
  rounds 1 and 2 ends on the uninterrupted run's model, to the bit."""
  del tmp_cache
  config = helpers.small_digits_config('feddyn', 'tf', {'variant': variant, 'mu': 1e-2},
                                       rounds=3, local_epochs=2)
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(1, 2))
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  assert [r['feddyn'] for r in whole.history] == [r['feddyn'] for r in resumed.history]
