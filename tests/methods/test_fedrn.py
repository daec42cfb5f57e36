"""FedRN (Kim et al. 2022) as a method: the client part keeps its trained model, the
server's expertise and probe output, one client's selection on a toy model against the
NumPy ops, the record by hand, the parameters, and digits runs (tf: not FedAvg, trains on
the selection; equal on tff, slow)."""
import collections
import types

import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import diagnostics
from tff_noisy import methods
from tff_noisy import reporting
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.methods.fedrn import algorithm
from tff_noisy.methods.fedrn.diagnostics import Selection
from tff_noisy.methods.fedrn.parts import LocalModel, ROUND, TRAINED_ROUND, weight_names
from tff_noisy.methods.fedrn.report import SelectionSection
from tff_noisy.ops import dividemix
from tff_noisy.ops import fedrn
from tff_noisy.simulation import driver
from tff_noisy.simulation.client_state import ClientStateStore
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_C = 3
_N = 12
_SEED = 3


def _model_fn():
  inputs = tf.keras.Input((4,))
  hidden = tf.keras.layers.Dense(5, activation='relu', name='body')(inputs)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(_C, name='logits')(hidden))


def _weights(seed):
  tf.keras.utils.set_random_seed(seed)
  return [2.0 * w for w in _model_fn().get_weights()]  # Spread the losses.


def _predict(weights, x, features=False):
  kernel, bias, head, head_bias = (np.asarray(w, np.float64) for w in weights)
  phi = np.maximum(x @ kernel + bias, 0.0)
  return phi if features else phi @ head + head_bias


def test_the_client_keeps_its_trained_model_and_round():
  model = _model_fn()
  model.set_weights(_weights(1))
  received = model.get_weights()
  x, y = helpers.random_client(2, _N, classes=_C)
  shapes = [w.shape for w in received]
  part = LocalModel(shapes)
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                  client_work.model_weights_of(model))
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(0.5),
                                           ClientProgram([CrossEntropy(), part]),
                                           local_epochs=1)
  state = collections.OrderedDict(
      (k, tf.constant(v)) for k, v in part.initial_state(y).items())
  assert float(state[TRAINED_ROUND]) == 0.0
  result, _, state = train(initial, helpers.client_dataset(x, y), state,
                           collections.OrderedDict({ROUND: tf.constant(7.0)}))
  trained = [w - u.numpy() for w, u in zip(received, result.update.trainable)]
  assert float(state[TRAINED_ROUND]) == 7.0
  for name, value in zip(weight_names(len(shapes)), trained):
    np.testing.assert_allclose(state[name].numpy(), value, atol=1e-6)
  assert helpers.max_difference(trained, received) > 1e-3  # It trained.


def test_the_head_is_found_and_a_nonlinear_head_is_refused():
  model = _model_fn()
  assert algorithm.linear_head(model) == (2, 3)
  inputs = tf.keras.Input((4,))
  soft = tf.keras.Model(inputs, tf.keras.layers.Dense(_C, activation='softmax',
                                                      name='logits')(inputs))
  with pytest.raises(ConfigError, match="^model: FedRN fine-tunes the model's 'logits' layer"):
    algorithm.linear_head(soft)


def test_fine_tuning_batches_cover_the_clean_examples_once():
  clean = np.array([True, False, True, True, False, True, True])
  batches = algorithm.head_batches(clean, 2, seed=1, round_num=4, key=0)
  assert [len(b) for b in batches] == [2, 2, 1]
  assert sorted(np.concatenate(batches)) == [0, 2, 3, 5, 6]
  again = algorithm.head_batches(clean, 2, seed=1, round_num=4, key=0)
  assert all((a == b).all() for a, b in zip(batches, again))
  assert [len(b) for b in algorithm.head_batches(clean, None, 1, 4, 0)] == [5]


class _Process:
  def __init__(self, program):
    self.program = program
    self.hparams = {}

  def set_hparams(self, state, hparams):
    self.hparams = dict(hparams)
    return state


def _server(k=1, alpha=0.6, threshold=0.5, momentum=0.9):
  """Three clients a, b, c with local models of seeds 1, 2, 3 (trained in round 1)."""
  params = methods.resolve_params('fedrn', {'warmup_rounds': 1, 'num_neighbors': k,
                                            'alpha': alpha, 'threshold': threshold,
                                            'head_momentum': momentum}, rounds=5)
  data = {cid: helpers.random_client(seed, _N, classes=_C) for seed, cid in
          enumerate('abc', 10)}
  element_spec = helpers.client_dataset(*data['a'], batch_size=5, aggregation_weight=np.ones(
      _N, np.float32)).element_spec
  setup = types.SimpleNamespace(model_fn=_model_fn, element_spec=element_spec, batch_size=5,
                                client_lr=0.3, weight_decay=0.01, seed=_SEED, rounds=5,
                                probes_in_process=True)
  recipe = algorithm.fedrn(params, setup)
  program = ClientProgram(recipe.parts)
  store = ClientStateStore()
  names = weight_names(4)
  for seed, cid in enumerate('abc', 1):
    state = program.initial_state(data[cid][1])
    state.update(zip(names, _weights(seed)))
    state[TRAINED_ROUND] = np.float32(1.0)
    store.set_objective_state(cid, state)
  server = types.SimpleNamespace(
      process=_Process(program), setup=setup, store=store,
      data=types.SimpleNamespace(client_ids=['a', 'b', 'c'], x={c: v[0] for c, v in data.items()},
                                 y={c: v[1] for c, v in data.items()}),
      datasets=lambda: {c: None for c in 'abc'})
  (step,) = recipe.server
  step.prepare(server)
  return step, server, data


def _scored(step, server):
  """Warm-up round 1 (every client), its expertise and probe outputs after it; the next
  round samples client a alone."""
  assert step.before(1, 'state', server) == ('state', {'fedrn_active': False})
  assert step.after(1, 'state', server) == ('state', {})
  server.datasets = lambda: {'a': None}


def test_after_a_round_the_server_keeps_expertise_and_the_noise_output():
  step, server, data = _server()
  _scored(step, server)
  noise = algorithm.noise_input((4,), _SEED)
  for seed, cid in enumerate('abc', 1):
    x, y = data[cid]
    assert server.store.get(cid, algorithm.EXPERTISE) == pytest.approx(
        fedrn.expertise(_predict(_weights(seed), x), y))
    np.testing.assert_allclose(server.store.get(cid, algorithm.PROBE_OUTPUT),
                               _predict(_weights(seed), noise)[0], rtol=1e-5, atol=1e-6)
  # A model of an earlier round is not scored again.
  server.store.set('b', algorithm.EXPERTISE, -1.0)
  step.after(2, 'state', server)
  assert server.store.get('b', algorithm.EXPERTISE) == -1.0


def test_a_client_s_selection_composes_the_numpy_ops():
  step, server, data = _server()
  _scored(step, server)
  state, record = step.before(2, 'state', server)
  assert state == 'state' and record['fedrn_active']
  assert server.process.hparams == {ROUND: 2.0}
  # By hand from the ops: scores over a, b, c, the one neighbour, own GMM, the neighbour's
  # head fine-tuned on own w > τ, its GMM, the 2-model ensemble.
  store = server.store
  expertise = [store.get(c, algorithm.EXPERTISE) for c in 'abc']
  outputs = [store.get(c, algorithm.PROBE_OUTPUT) for c in 'abc']
  scores = fedrn.reliability_scores(0, expertise, outputs, 0.6)
  (neighbour,) = fedrn.select_neighbors(0, scores, 1)
  x, y = data['a']
  own_w = dividemix.clean_probability(fedrn.cross_entropy(_predict(_weights(1), x), y), _SEED)
  own = fedrn.clean_mask(own_w)
  batches = algorithm.head_batches(own, 5, _SEED, 2, 0)
  weights = _weights(int(neighbour) + 1)
  phi = _predict(weights, x, features=True)
  kernel, bias = fedrn.finetune_head(phi, y, weights[2], weights[3], batches, 0.3, 0.9, 0.01)
  w_n = dividemix.clean_probability(fedrn.cross_entropy(phi @ kernel + bias, y), _SEED)
  expected = fedrn.clean_mask(fedrn.ensemble_clean_probability(
      [own_w, w_n], [scores[0], scores[neighbour]]))
  selection = record['fedrn_selection']
  np.testing.assert_array_equal(selection.own['a'], own)
  np.testing.assert_array_equal(selection.selected['a'], expected)
  assert selection.neighbours == {'a': ['abc'[neighbour]]}
  assert 0 < expected.sum() < _N  # A real selection on this toy.
  # The data plan keeps exactly it this round, nobody else's, and nothing another round.
  np.testing.assert_array_equal(step.kept('a', store), np.flatnonzero(expected))
  assert step.kept('b', store) is None
  # Its update keeps the weight of all of its examples: n / |kept| per kept example.
  weights = step.extras('a', int(expected.sum()), store)['aggregation_weight']
  np.testing.assert_allclose(weights, np.full(expected.sum(), _N / expected.sum()))
  step.before(1, 'state', server)  # Warm-up again: no selection.
  assert step.kept('a', store) is None


def test_no_neighbour_is_the_own_gmm_alone_and_untrained_clients_train_on_everything():
  step, server, data = _server(k=0)
  _scored(step, server)
  _, record = step.before(2, 'state', server)
  x, y = data['a']
  own = fedrn.clean_mask(dividemix.clean_probability(
      fedrn.cross_entropy(_predict(_weights(1), x), y), _SEED))
  np.testing.assert_array_equal(record['fedrn_selection'].selected['a'], own)
  # Client b never scored (no local model): nobody's neighbour, trains on everything.
  step, server, _ = _server(k=1)
  _scored(step, server)
  server.store.set('b', algorithm.EXPERTISE, None)
  server.datasets = lambda: {'a': None, 'b': None}
  _, record = step.before(2, 'state', server)
  assert record['fedrn_selection'].neighbours == {'a': ['c']}
  assert record['fedrn_selection'].untrained == ['b'] and step.kept('b', server.store) is None


def test_too_many_neighbours_for_the_clients_is_a_one_line_error():
  with pytest.raises(ConfigError, match=r'^method.params.num_neighbors: needs fewer neighbours '
                                        r'than the 3 clients, got 3$'):
    _server(k=3)


def test_the_record_scores_both_clean_sets_and_the_neighbours_noise():
  # Client a: true (0, 1, 2, 0), observed (0, 1, 1, 0): clean 0, 1, 3. Own set 0, 2 (1 clean
  # of 2; 1 of 3 clean labels); trained set 0, 1, 3 (all clean, all of them). Neighbour b
  # (noise 0.5) of candidates a, b, c (0.25, 0.5, 0): 0.5 against 0.25.
  truth = diagnostics.Truth(('a', 'b', 'c'), {'a': np.array([0, 1, 1, 0])},
                            {'a': np.array([0, 1, 2, 0])}, {'a': 0.25, 'b': 0.5, 'c': 0.0},
                            {})
  record = Selection({'a': np.array([True, False, True, False])},
                     {'a': np.array([True, True, False, True])}, {'a': ['b']},
                     ['a', 'b', 'c'], ['d'])
  scored = diagnostics.score({'s': record}, truth)['fedrn_selection']
  assert scored == {'clients': 1, 'untrained_clients': 1, 'selected_own': 2, 'selected': 3,
                    'neighbours': {'a': ['b']}, 'precision_own': 0.5,
                    'recall_own': pytest.approx(1 / 3), 'precision': 1.0, 'recall': 1.0,
                    'neighbour_noise_rate': 0.5, 'candidate_noise_rate': 0.25}
  assert diagnostics.score({'s': record}, None) == {'fedrn_selection': {
      'clients': 1, 'untrained_clients': 1, 'selected_own': 2, 'selected': 3,
      'neighbours': {'a': ['b']}}}


@pytest.mark.parametrize('params, match', [
    ({'warmup_rounds': 10}, r'^method.params.warmup_rounds: needs a number of rounds in '
                            r'\[0, fl.rounds=10\) \(or null\), got 10$'),
    ({'num_neighbors': -1}, r'^method.params.num_neighbors: needs an integer >= 0, got -1$'),
    ({'alpha': 1.5}, r'^method.params.alpha: needs a number in \[0, 1\], got 1.5$'),
    ({'threshold': 1.0}, r'^method.params.threshold: needs a number in \[0, 1\), got 1.0$'),
    ({'head_momentum': 1}, r'^method.params.head_momentum: needs a number in \[0, 1\), got 1$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('fedrn', params, rounds=10)


def test_the_defaults_are_fnbench_s():
  params = methods.resolve_params('fedrn', {}, rounds=120)
  assert (params.warmup(120), params.num_neighbors, params.alpha, params.threshold,
          params.head_momentum) == (30, 1, 0.6, 0.5, 0.9)


def _digits(runtime='tf', method='fedrn'):
  params = {'warmup_rounds': 1} if method == 'fedrn' else {}
  return helpers.small_digits_config(method, runtime, params, rounds=4)


def test_fedrn_runs_on_digits_trains_on_its_selection_and_is_not_fedavg():
  run = helpers.run_rounds(_digits())
  assert [r['fedrn_active'] for r in run.history] == [False, True, True, True]
  assert 'fedrn_selection' not in run.history[0]
  sizes = {cid: len(y) for cid, y in run.data.y.items()}
  for record in run.history[1:]:
    selection = record['fedrn_selection']
    weights = dict(zip(record['clients'], record['client_weights']))
    selecting = list(selection['neighbours'])
    assert selection['clients'] == len(selecting) >= 1
    # A selecting client trains on its selection (its steps' examples) and keeps the update
    # weight of all of its examples.
    assert selection['selected'] < sum(sizes[c] for c in selecting)
    assert all(weights[c] == pytest.approx(sizes[c]) for c in record['clients'])
    assert 0 < selection['precision'] <= 1 and 0 < selection['recall'] < 1
  assert all(np.isfinite(r['test_accuracy']) for r in run.history)
  # The last round's clients were built from its selection: the examples they trained on.
  last = run.history[-1]
  built, _ = driver.client_datasets(run.recipe.data, run.data, run.store, last['clients'],
                                    [0] * len(last['clients']), 32)
  selecting = list(last['fedrn_selection']['neighbours'])
  assert sum(built[c].num_examples for c in selecting) == last['fedrn_selection']['selected']
  fedavg = helpers.run_rounds(_digits(method='fedavg'))
  assert helpers.max_difference(run.final_weights(), fedavg.final_weights()) > 1e-3
  # Its report section: one summary line, one table row (the last round's record).
  last = run.history[-1]['fedrn_selection']
  results = {'rounds': run.history}
  (line,) = SelectionSection().summary(results)
  assert line.startswith('FedRN clean selection: precision ')
  w = reporting.Writer('.')
  SelectionSection().render(w, {None: {'fedrn': [reporting.Run('.', 'fedrn', None, 1, results)]}})
  assert w.lines[0] == '## FedRN clean selection'
  assert w.lines[-2].startswith(f'| fedrn | seed 1 | 4 | {last["clients"]} | '
                                f'{last["selected_own"]} |')


@pytest.mark.slow
def test_fedrn_runs_equally_on_tff_and_tf():
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  assert [r['fedrn_selection'] for r in runs['tff'].history[1:]] == [
      r['fedrn_selection'] for r in runs['tf'].history[1:]]


@pytest.mark.slow
def test_a_resumed_run_keeps_the_local_models_and_the_selections(tmp_path):
  config = _digits()
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(1, 2))
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  assert [r['fedrn_selection'] for r in resumed.history[1:]] == [
      r['fedrn_selection'] for r in whole.history[1:]]
