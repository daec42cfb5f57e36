"""Ditto, two readings. As FedEFC's code runs it ("FedDitto", the default): CE +
λ||θ - w^t||² at every step, whose gradient 2λ(θ - w^t) is FedProx's term of strength 2λ;
two steps by hand on a toy model, the parameters, and digits runs (tf, FedProx with
μ = 2λ to the bit; equal on tff). As the paper (``variant: paper``, Li et al. 2021,
Algorithm 1): one personal step by hand, the personal model kept between rounds and
never aggregated (the global model is FedAvg's on the same examples to the bit), the
held-out split never trained on, the personalised accuracy of a hand-built case, a
resumed run equal to an uninterrupted one, and digits runs (tf; equal on tff)."""
import collections
import types

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import diagnostics as diagnostics_lib
from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.methods import contract
from tff_noisy.methods.ditto import algorithm as ditto_lib
from tff_noisy.methods.ditto import DittoParams
from tff_noisy.methods.ditto import parts as ditto_parts
from tff_noisy.methods.ditto import report as ditto_report
from tff_noisy.methods.ditto.diagnostics import PersonalAccuracy
from tff_noisy.ops import ditto
from tff_noisy.simulation import driver
from tff_noisy.simulation.client_state import ClientStateStore
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
    ({'variant': 'personal'}, r"^method.params.variant: needs 'fedefc' or 'paper', got"),
    ({'variant': 'paper', 'test_fraction': 1.0},
     r'^method.params.test_fraction: needs a number in \(0, 1\), got 1.0$'),
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


# The paper's Ditto (variant: paper).

_LAM = 0.3


def _toy_model():
  return tf.keras.Sequential([tf.keras.layers.Input((1,)),
                              tf.keras.layers.Dense(2, name='logits',
                                                    kernel_initializer='zeros')])


def _paper_program(model_fn, lam=_LAM, lr=_LR):
  setup = types.SimpleNamespace(model_fn=model_fn, client_lr=lr, weight_decay=0.0, seed=0)
  recipe_value = ditto_lib.ditto(DittoParams(variant='paper', lam=lam), setup)
  return recipe_value, ClientProgram(recipe_value.parts)


def _one_client_round(program, state, epochs=1):
  """One round of the toy client (one example x = 2, label 0) from zero weights."""
  model = _toy_model()
  train = client_work.build_local_training(
      model, tff.learning.optimizers.build_sgdm(_LR), program, local_epochs=epochs,
      model_fn=_toy_model)
  received = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                   client_work.model_weights_of(model))
  dataset = helpers.client_dataset(np.array([[2.0]], np.float32), np.array([0]))
  return train(received, dataset, state, collections.OrderedDict())


def _personal(program, state):
  part = program.parts[1]
  return [np.asarray(state[n]) for n in part.names]


def test_one_personal_step_by_hand_and_the_global_step_is_fedavgs():
  """Received w^t = 0 (kernel, bias); kept v = kernel (0.5, -0.5), bias (0.25, -0.25).
  One example x = 2, label 0. v's logits 2·(0.5, -0.5) + (0.25, -0.25) = (1.25, -1.25),
  p_0 = σ(2.5): ∇F(v) = (p_0 - 1)·(2, 1) on (kernel_0, bias_0), its negative on class 1;
  λ(v - w^t) = 0.3·v. v ← v - η(∇F(v) + λ v), η = 0.5. The global model steps on CE
  alone from w^t = 0 (p = (1/2, 1/2)): its update is FedAvg's, η·(2·(-1/2, 1/2),
  (-1/2, 1/2)) = kernel (-0.5, 0.5), bias (-0.25, 0.25), whatever v is."""
  _, program = _paper_program(_toy_model)
  state = program.initial_state(None)
  kernel, bias = np.array([[0.5, -0.5]], np.float32), np.array([0.25, -0.25], np.float32)
  names = program.parts[1].names
  state[names[0]], state[names[1]] = kernel, bias
  state[ditto_parts.HAS_PERSONAL] = np.int32(1)
  result, _, new_state = _one_client_round(program, state)
  p0 = 1.0 / (1.0 + np.exp(-2.5))
  grad_kernel = np.array([[(p0 - 1) * 2, (1 - p0) * 2]])
  grad_bias = np.array([p0 - 1, 1 - p0])
  want = [kernel - _LR * (grad_kernel + _LAM * kernel), bias - _LR * (grad_bias + _LAM * bias)]
  np.testing.assert_allclose(want[1], [0.25 - 0.5 * (p0 - 1 + 0.075),
                                       -0.25 - 0.5 * (1 - p0 - 0.075)])  # The bias, spelt out.
  for got, w in zip(_personal(program, new_state), want):
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
  assert int(new_state[ditto_parts.HAS_PERSONAL]) == 1
  np.testing.assert_allclose(result.update.trainable[0].numpy(), [[-0.5, 0.5]], atol=1e-6)
  np.testing.assert_allclose(result.update.trainable[1].numpy(), [-0.25, 0.25], atol=1e-6)
  fedavg, _, _ = _one_client_round(ClientProgram([CrossEntropy()]), ())
  for a, b in zip(tf.nest.flatten(result.update), tf.nest.flatten(fedavg.update)):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_first_round_starts_v_from_the_received_model_and_pulls_towards_it():
  """No personal model yet: v = w^t = 0, λ(v - w^t) = 0, so the first step of v is the
  global model's (plain SGD, the same batch): kernel (0.5, -0.5), bias (0.25, -0.25).
  The second step (two local epochs) pulls v towards w^t = 0, not towards the global
  model's current weights: v_2 = v_1 - η(∇F(v_1) + λ v_1) with ∇F(v_1) as above."""
  _, program = _paper_program(_toy_model)
  result, _, new_state = _one_client_round(program, program.initial_state(None))
  v1 = [np.array([[0.5, -0.5]]), np.array([0.25, -0.25])]
  for got, want in zip(_personal(program, new_state), v1):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  for got, update in zip(_personal(program, new_state), result.update.trainable):
    np.testing.assert_allclose(got, -update.numpy(), rtol=1e-5, atol=1e-6)
  _, _, two = _one_client_round(program, program.initial_state(None), epochs=2)
  p0 = 1.0 / (1.0 + np.exp(-2.5))
  grads = [np.array([[(p0 - 1) * 2, (1 - p0) * 2]]), np.array([p0 - 1, 1 - p0])]
  v2 = ditto.personal_step(v1, grads, [np.zeros((1, 2)), np.zeros(2)], _LAM, _LR)
  for got, want in zip(_personal(program, two), v2):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_personal_variables_follow_the_models_order_whatever_their_creation_order():
  """A model whose head was built before its hidden layer: a tape watches the head's
  variables first; watch_order maps them back to ModelWeights order."""
  def model_fn():
    hidden, head = tf.keras.layers.Dense(3), tf.keras.layers.Dense(2, name='logits')
    head.build((None, 3))
    inputs = tf.keras.Input((4,))
    return tf.keras.Model(inputs, head(hidden(inputs)))

  assert ditto_lib.watch_order(model_fn()) == (2, 3, 0, 1)
  _, program = _paper_program(model_fn)
  model = model_fn()
  x, labels = helpers.random_client(0, 6, features=4, classes=2)
  received = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                   client_work.model_weights_of(model))
  train = client_work.build_local_training(
      model, tff.learning.optimizers.build_sgdm(_LR), program, local_epochs=1,
      model_fn=model_fn)
  result, _, state = train(received, helpers.client_dataset(x, labels),
                           program.initial_state(None), collections.OrderedDict())
  assert [v.shape for v in _personal(program, state)] == [(4, 3), (3,), (3, 2), (2,)]
  # First round: v steps as the global model does (same batch, plain SGD, no pull).
  for got, w, update in zip(_personal(program, state), received.trainable,
                            result.update.trainable):
    np.testing.assert_allclose(got, w.numpy() - update.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('layer, match', [
    (tf.keras.layers.Dropout(0.5), 'computes otherwise in training mode'),
    (tf.keras.layers.BatchNormalization(), 'computes otherwise in training mode'),
    (tf.keras.layers.ActivityRegularization(l2=0.1), 'adds regularisation losses')])
def test_a_model_the_personal_step_cannot_train_as_the_global_one_is_refused(layer, match):
  def model_fn():
    inputs = tf.keras.Input((4,))
    return tf.keras.Model(inputs, tf.keras.layers.Dense(2, name='logits')(layer(inputs)))

  with pytest.raises(ConfigError, match=r"^model.name: method.name ditto with variant 'paper'"
                     f'.*{match}') as raised:
    _paper_program(model_fn)
  assert '\n' not in str(raised.value)


def test_the_held_out_split_is_seeded_per_client_and_within_bounds():
  # round(n/7): 100 -> 14; 3 -> 0, raised to 1; 1 example: nothing held out.
  a = ditto.held_out_positions(100, 1 / 7, seed=5, client_index=2)
  assert len(a) == 14 and len(set(a)) == 14 and a.min() >= 0 and a.max() < 100
  np.testing.assert_array_equal(a, ditto.held_out_positions(100, 1 / 7, 5, 2))
  assert not np.array_equal(a, ditto.held_out_positions(100, 1 / 7, 5, 3))
  assert len(ditto.held_out_positions(3, 1 / 7, 0, 0)) == 1
  assert len(ditto.held_out_positions(2, 0.9, 0, 0)) == 1  # At most n - 1.
  assert len(ditto.held_out_positions(1, 0.5, 0, 0)) == 0


def _truth(true_labels, observed):
  ids = tuple(true_labels)
  return diagnostics_lib.Truth(ids, observed, true_labels, {c: 0.0 for c in ids}, {})


def test_the_personalised_accuracy_of_a_hand_built_case():
  """Client a: predictions (0, 1, 1) at positions (0, 2, 3) of true labels (0, 9, 1, 0):
  2 of 3 right; client b: (2, 2) at (1, 0) of (2, 0): 1 of 2. Pooled 3/5 = 0.6, client
  mean (2/3 + 1/2)/2 = 7/12, variance of (2/3, 1/2) = (1/12)² = 1/144. On the observed
  labels (a: (0, 1, 1) right 3 of 3; b: (1, 2) right 1 of 2): 4/5."""
  predicted = {'a': np.array([0, 1, 1]), 'b': np.array([2, 2])}
  positions = {'a': np.array([0, 2, 3]), 'b': np.array([1, 0])}
  observed = {'a': np.array([0, 1, 1]), 'b': np.array([1, 2])}
  true = {'a': np.array([0, 9, 1, 0]), 'b': np.array([2, 0])}
  record = PersonalAccuracy(predicted, positions, observed)
  scored = diagnostics_lib.score({'ditto_personal': record},
                                 _truth(true, {'a': np.zeros(4), 'b': np.zeros(2)}))
  assert scored['personalized_accuracy'] == pytest.approx(0.6)
  assert scored['personalized_client_mean_accuracy'] == pytest.approx(7 / 12)
  assert scored['ditto_personal'] == pytest.approx({
      'clients': 2, 'test_examples': 5, 'accuracy': 0.6, 'client_mean_accuracy': 7 / 12,
      'accuracy_variance': 1 / 144, 'accuracy_observed_labels': 0.8})
  unscored = diagnostics_lib.score({'ditto_personal': record}, None)
  assert unscored['personalized_accuracy'] == pytest.approx(0.8)
  assert diagnostics_lib.score({'d': PersonalAccuracy({}, {}, {})}, None) == {}


def test_the_server_step_scores_the_clients_that_have_a_personal_model():
  """A 2-feature, 2-class linear model. Client a's personal model: kernel I, bias 0, so
  it predicts argmax(x); held out: its positions 1 and 3, x = (1, 0) and (0, 1), labels
  (0, 0): one right. Client b has no personal model yet: not scored."""
  def model_fn():
    return helpers.linear_model(2, 2)

  _, program = _paper_program(model_fn)
  step = program.parts[1]
  split = ditto_lib.HeldOutSplit(0.5, 0, step.names)
  store = ClientStateStore()
  x = {'a': np.array([[5, 0], [1, 0], [0, 5], [0, 1]], np.float32),
       'b': np.array([[1, 0], [0, 1]], np.float32)}
  y = {'a': np.array([0, 0, 1, 0]), 'b': np.array([0, 1])}
  for cid in ('a', 'b'):
    store.set_derived(cid, ditto_lib.TEST_POSITIONS, np.array([1, 3]) if cid == 'a'
                      else np.array([0]))
  state = program.initial_state(None)
  state[step.names[0]], state[step.names[1]] = np.eye(2, dtype=np.float32), np.zeros(2, np.float32)
  state[ditto_parts.HAS_PERSONAL] = np.int32(1)
  store.set_objective_state('a', state)
  model = model_fn()
  process = types.SimpleNamespace(
      program=program, get_model_weights=lambda s: client_work.model_weights_of(model))
  server = contract.ServerContext(process, types.SimpleNamespace(model_fn=model_fn),
                                  types.SimpleNamespace(client_ids=['a', 'b'], x=x, y=y),
                                  store)
  _, out = split.after(1, None, server)
  record = out['ditto_personal']
  assert list(record.predicted) == ['a']
  np.testing.assert_array_equal(record.predicted['a'], [0, 1])
  scored = diagnostics_lib.score(out, _truth({'a': y['a'], 'b': y['b']}, y))
  assert scored['personalized_accuracy'] == pytest.approx(0.5)
  assert scored['ditto_personal']['clients'] == 1


def _paper_config(runtime='tf', method='ditto'):
  return helpers.small_digits_config(method, runtime, dict(variant='paper', lam=1.0),
                                     rounds=3, local_epochs=2, stack_clients=False)


@pytest.fixture
def held_out_fedavg(monkeypatch):
  """'fedavg_held_out': FedAvg on the examples Ditto's paper variant trains on (its
  held-out split, no personal model), on a copy of the registry."""
  def build(params, setup):
    split = ditto_lib.HeldOutSplit(params.test_fraction, setup.seed, ())
    return contract.Recipe(data=contract.DataPlan(kept=split.kept),
                           server=(_SplitOnly(split),))

  monkeypatch.setattr(methods, 'METHODS', methods.METHODS.copy())
  methods.register({'fedavg_held_out': contract.MethodSpec('FedAvg on Ditto\'s split',
                                                           DittoParams, build)})


class _SplitOnly(contract.ServerStep):
  def __init__(self, split):
    self.split = split

  def prepare(self, server):
    return self.split.prepare(server)


def test_the_global_model_is_fedavgs_on_the_kept_examples(tmp_cache, held_out_fedavg):
  del tmp_cache, held_out_fedavg
  paper = driver.run_experiment(_paper_config(), None, progress=False)
  fedavg = driver.run_experiment(_paper_config(method='fedavg_held_out'), None,
                                 progress=False)
  assert helpers.max_difference(paper.final_weights, fedavg.final_weights) == 0
  plain = driver.run_experiment(helpers.small_digits_config(
      'fedavg', 'tf', rounds=3, local_epochs=2, stack_clients=False), None, progress=False)
  assert helpers.max_difference(paper.final_weights, plain.final_weights) > 1e-4


def test_the_held_out_examples_are_never_trained_on(tmp_cache):
  del tmp_cache
  simulation = driver.Simulation(_paper_config())
  simulation.prepare()
  data, store = simulation.data, simulation.store
  ids = list(data.client_ids)
  clients, _ = driver.client_datasets(simulation.recipe.data, data, store, ids,
                                      range(len(ids)), 32)
  for cid in ids:
    test = store.get(cid, ditto_lib.TEST_POSITIONS)
    kept = store.get(cid, ditto_lib.TRAIN_POSITIONS)
    n = len(data.y[cid])
    assert len(test) == round(n / 7) and not set(test) & set(kept)
    assert sorted(set(test) | set(kept)) == list(range(n))
    trained = np.concatenate([b['x'].numpy() for b in clients[cid].dataset()])
    rows = lambda a: sorted(r.tobytes() for r in a.reshape(len(a), -1))  # pylint: disable=unnecessary-lambda-assignment
    assert rows(trained) == rows(data.x[cid][kept])


def test_a_digits_run_reports_the_personalised_accuracy_and_keeps_the_personal_models(
    tmp_cache):
  del tmp_cache
  simulation = helpers.run_rounds(_paper_config())
  seen = set()
  program = simulation.process.program
  for record in simulation.history:
    seen |= set(record['clients'])
    assert record['ditto_personal']['clients'] == len(seen)
    assert 0 <= record['personalized_accuracy'] <= 1
    assert 'test_accuracy' in record
  assert simulation.history[-1]['personalized_accuracy'] > 0.3
  assert simulation.extra['ditto_split']['test_examples'] > 0
  global_weights = simulation.final_weights()
  names = program.parts[1].names
  for cid in simulation.data.client_ids:
    state = simulation.store.objective_state(cid, program, simulation.data.y[cid])
    assert int(state[ditto_parts.HAS_PERSONAL]) == (cid in seen)
    if cid in seen:  # Kept, not aggregated: it is not the global model.
      assert helpers.max_difference([state[n] for n in names], global_weights) > 1e-3
  section = ditto_report.SECTIONS[0]
  line = section.summary({'rounds': simulation.history})[0]
  assert line.startswith('Ditto personalised accuracy ')


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_cache, tmp_path):
  del tmp_cache
  whole = helpers.run_rounds(_paper_config())
  resumed = helpers.run_with_restarts(_paper_config(), str(tmp_path / 'ckpt'), {1, 2})
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  assert [r['ditto_personal'] for r in whole.history] == [
      r['ditto_personal'] for r in resumed.history]


@pytest.mark.slow
def test_paper_digits_runs_are_equal_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: driver.run_experiment(_paper_config(runtime), None, progress=False)
          for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights, runs['tf'].final_weights) < 1e-5
  for want, got in zip(runs['tff'].rounds, runs['tf'].rounds):
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-6)
    assert got['personalized_accuracy'] == pytest.approx(want['personalized_accuracy'],
                                                         abs=1e-6)
