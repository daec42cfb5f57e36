"""FedDiv: its parameters (the released code's defaults, one-line errors), its client part
on a toy model by hand (an idle client sends the received model back), its warm-up
groups, its records against a hand-made truth, and digits runs through the driver (not
FedAvg; the aggregation weights are the clients' sizes; equal on both runtimes; resumed
equal to uninterrupted)."""

import collections

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy import diagnostics
from tff_noisy import methods
from tff_noisy import reporting
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.methods.feddiv import algorithm
from tff_noisy.methods.feddiv.diagnostics import Relabelling, Selection
from tff_noisy.methods.feddiv.parts import SendsReceivedWhenIdle, TRAINS
from tff_noisy.methods.feddiv.report import RelabellingSection, SelectionSection
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5


def test_the_defaults_are_the_released_codes():
  params = methods.resolve_params('feddiv', {}, rounds=405)  # iteration1 + rounds1 + rounds2.
  assert (params.warmup_rounds, params.warmup_fraction, params.filter_iterations,
          params.clean_probability, params.filter_loss, params.clean_set_threshold,
          params.relabel_threshold, params.sampler_start, params.confidence, params.xi,
          params.prior_momentum, params.prior_confidence) == (
              5, 0.01, 3, 0.5, 'softmax_cross_entropy', 0.1, 0.2, 5, 0.0, 0.2, 0.5, 0.85)


@pytest.mark.parametrize('params, match', [
    ({'warmup_rounds': 10}, r'^method.params.warmup_rounds: needs an integer in '
                            r'\[0, fl.rounds=10\), got 10$'),
    ({'warmup_fraction': 0}, r'^method.params.warmup_fraction: needs a share in \(0, 1\]'),
    ({'filter_iterations': 0}, r'^method.params.filter_iterations: needs an integer >= 1'),
    ({'clean_probability': 1.0}, r'^method.params.clean_probability: needs a probability'),
    ({'filter_loss': 'mae'}, r"^method.params.filter_loss: needs 'softmax_cross_entropy' or "
                             r"'cross_entropy', got 'mae'"),
    ({'clean_set_threshold': 1.5}, r'^method.params.clean_set_threshold: needs a share'),
    ({'relabel_threshold': -0.1}, r'^method.params.relabel_threshold: needs a share'),
    ({'sampler_start': -1}, r'^method.params.sampler_start: needs an integer >= 0'),
    ({'confidence': 1.0}, r'^method.params.confidence: needs a probability in \[0, 1\)'),
    ({'xi': -1.0}, r'^method.params.xi: needs a number >= 0'),
    ({'prior_momentum': 1.0}, r'^method.params.prior_momentum: needs a number in \[0, 1\)'),
    ({'prior_confidence': 1.0}, r'^method.params.prior_confidence: needs a probability'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match) as error:
    methods.resolve_params('feddiv', params, rounds=10)
  assert '\n' not in str(error.value)


# Three inputs, three classes, W = I and b = 0: the logits are the inputs.
_X = np.array([[0, 0, 2], [1, 0, 0], [0, 2, 0], [0, 1, 1]], np.float32)
_Y = np.array([2, 0, 0, 1])


def _train(trains: float):
  model = helpers.linear_model(3, 3)
  model.set_weights([np.eye(3, dtype=np.float32), np.zeros(3, np.float32)])
  received = model.get_weights()
  train = client_work.build_local_training(
      model, tff.learning.optimizers.build_sgdm(_LR),
      ClientProgram([SendsReceivedWhenIdle(), CrossEntropy()]), local_epochs=1)
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                  client_work.model_weights_of(model))
  result, metrics, state = train(initial, helpers.client_dataset(_X, _Y),
                                 collections.OrderedDict({TRAINS: tf.constant(trains)}),
                                 collections.OrderedDict())
  return received, [u.numpy() for u in result.update.trainable], result, metrics, state


def test_a_training_client_sends_its_cross_entropy_step():
  # One step on the mean CE of the 4 examples: ∂/∂z = (softmax(z) − onehot(y))/4, z = x.
  received, update, result, _, state = _train(1.0)
  dz = (np.exp(_X) / np.exp(_X).sum(1, keepdims=True) - np.eye(3)[_Y]) / 4
  np.testing.assert_allclose(received[0] - update[0], np.eye(3) - _LR * _X.T @ dz,
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(received[1] - update[1], -_LR * dz.sum(0), rtol=1e-5, atol=1e-6)
  assert float(result.update_weight) == 4.0 and float(state[TRAINS]) == 1.0


def test_an_idle_client_sends_the_received_model_back():
  """The code's len(revised_sample_idx) <= local_bs: the global weights, n_k in FedAvg."""
  _, update, result, metrics, _ = _train(0.0)
  for u in update:
    np.testing.assert_array_equal(u, np.zeros_like(u))
  assert float(result.update_weight) == 4.0  # The weighting sets n_k in a run.
  assert float(metrics['num_examples']) == 4.0


def test_warm_up_deals_every_client_into_groups_then_one_round():
  params = methods.resolve_params('feddiv', {'warmup_rounds': 2, 'warmup_fraction': 0.34},
                                  rounds=4)
  setup = type('Setup', (), {'seed': 3, 'num_classes': 3})()
  steps = algorithm.FedDivSteps(params, setup)
  groups = steps.groups(1, None, 6)
  assert [len(g) for g in groups] == [2, 2, 2]  # ⌊6·0.34⌋ = 2.
  assert sorted(np.concatenate(groups).tolist()) == list(range(6))
  assert [g.tolist() for g in steps.groups(1, None, 6)] == [g.tolist() for g in groups]
  assert [steps.everyone(r) for r in (1, 2, 3)] == [True, True, False]
  assert steps.groups(3, None, 6) is None


def test_the_round_selection_is_the_data_plans_kept_and_none_between_rounds():
  from tff_noisy.simulation.client_state import ClientStateStore  # pylint: disable=g-import-not-at-top
  store = ClientStateStore()
  assert algorithm.kept('a', store) is None
  store.set('a', algorithm.KEPT, np.array([0, 2]))
  np.testing.assert_array_equal(algorithm.kept('a', store), [0, 2])
  store.set('a', algorithm.KEPT, np.zeros(0, np.int64))
  assert algorithm.kept('a', store) is None


def test_the_weighting_probes_each_local_model_and_weighs_by_client_size():
  """Local model = global − update (the update is θ_global − θ_local); sizes n_k whatever
  the clients trained on; a non-finite update (zeros, weight 0) is no visit, weight 0."""
  params = methods.resolve_params('feddiv', {'warmup_rounds': 1}, rounds=3)
  setup = type('Setup', (), {'seed': 0, 'num_classes': 3, 'batch_size': 2,
                             'element_spec': None})()
  steps = algorithm.FedDivSteps(params, setup)
  data = type('Data', (), {'y': {'a': np.array([0, 1, 2]), 'b': np.array([1, 1])},
                           'x': {'a': np.zeros((3, 1)), 'b': np.zeros((2, 1))}})()
  steps._data, steps._setup = data, setup  # pylint: disable=protected-access
  seen = {}

  def probe(weights, labels):
    seen.update({cid: [np.asarray(w) for w in weights] for cid in labels})
    return {cid: np.full((len(y), 3), 1 / 3) for cid, y in labels.items()}

  steps._probabilities = probe  # pylint: disable=protected-access
  from tff_noisy.simulation.client_state import ClientStateStore  # pylint: disable=g-import-not-at-top
  server = type('Server', (), {'store': ClientStateStore()})()
  assert steps(1, None, ['a', 'b'], [], server) is None  # Warm-up: the aggregator's own.
  weigh = steps(2, None, ['a', 'b'], [], server)
  result = collections.namedtuple('Result', 'update update_weight')
  global_weights = [np.array([1.0, 2.0]), np.array([3.0])]
  weights, record = weigh([result([np.array([0.5, -1.0]), np.array([1.0])], 1.0),
                           result([np.zeros(2), np.zeros(1)], 0.0)], global_weights)
  assert weights == [3.0, 0.0] and record == {'feddiv_update_weights': {'a': 3.0, 'b': 0.0}}
  assert list(seen) == ['a']
  np.testing.assert_array_equal(seen['a'][0], [0.5, 3.0])
  np.testing.assert_array_equal(seen['a'][1], [2.0])


def _truth():
  # Client a: observed 0 1 2 0, true 0 1 1 1 (examples 2 and 3 flipped); client b: 2 2, true.
  return diagnostics.Truth(('a', 'b'), {'a': np.array([0, 1, 2, 0]), 'b': np.array([2, 2])},
                           {'a': np.array([0, 1, 1, 1]), 'b': np.array([2, 2])},
                           {'a': 0.5, 'b': 0.0}, {})


def test_the_selection_is_scored_against_the_labels_it_split_on():
  # a split on 0 1 2 0 (right: 0, 1), clean: 0, 2; b on 2 2 (both right), clean: 0.
  # Selected 3, of which right 0 (a) and 0 (b): precision 2/3; right labels 4, selected 2:
  # recall 1/2. Trained: a's 0, 2, 3 with labels 0 1 1 1 after relabelling (all right),
  # b idle: 3 trained, precision 1; labels right at the split 4 of 6.
  record = Selection({'a': np.array([True, False, True, False]), 'b': np.array([True, False])},
                     {'a': np.array([0, 1, 2, 0]), 'b': np.array([2, 2])},
                     {'a': np.array([0, 2, 3]), 'b': np.zeros(0, np.int64)},
                     {'a': np.array([0, 1, 1, 1]), 'b': np.array([2, 2])})
  scored = diagnostics.score({'s': record}, _truth())['feddiv_selection']
  assert scored == {'clients': 2, 'selected': 3, 'precision': pytest.approx(2 / 3),
                    'recall': 0.5, 'trained': 3, 'trained_precision': 1.0,
                    'label_accuracy': pytest.approx(4 / 6)}
  assert diagnostics.score({'s': record}, None) == {
      'feddiv_selection': {'clients': 2, 'selected': 3, 'trained': 3}}


def test_the_relabelling_counts_flips_corrected_and_clean_labels_broken():
  # a: 0 1 2 0 -> 0 2 1 0 (true 0 1 1 1): example 2 corrected, example 1 broken, 3 still
  # wrong; b unchanged. 2 of the 6 were wrong before, 2 after.
  record = Relabelling({'a': np.array([0, 2, 1, 0]), 'b': np.array([2, 2])})
  scored = diagnostics.score({'r': record}, _truth())['feddiv_relabelling']
  assert {k: scored[k] for k in ('clients', 'changed', 'corrected', 'broken', 'wrong_before',
                                 'wrong_after')} == {
      'clients': 2, 'changed': 2, 'corrected': 1, 'broken': 1, 'wrong_before': 2,
      'wrong_after': 2}
  assert scored['fixed'] == 0.5 and scored['corrupted'] == 0.25


def _digits(runtime='tf', method='feddiv', **params):
  params = {'warmup_rounds': 2, 'warmup_fraction': 0.5, 'sampler_start': 1, **params}
  return helpers.small_digits_config(method, runtime, params if method == 'feddiv' else {},
                                     rounds=4, local_epochs=1,
                                     participation=0.75)


def test_feddiv_runs_on_digits_filters_relabels_and_is_not_fedavg():
  run = helpers.run_rounds(_digits())
  history = run.history
  assert [r.get('sub_rounds') for r in history] == [2, 2, None, None]  # Warm-up groups.
  assert all('feddiv_split' not in r for r in history[:2])
  sizes = {cid: len(run.data.y[cid]) for cid in run.data.client_ids}
  for record in history[2:]:
    split = record['feddiv_split']
    assert sorted(split) == sorted(record['clients'])
    # The round trains the selection; the aggregation weighs by the clients' sizes.
    assert record['client_weights'] == [float(split[c]['selected'] if split[c]['trains']
                                              else 1) for c in record['clients']]
    assert record['feddiv_update_weights'] == {c: float(sizes[c]) for c in record['clients']}
    selection = record['feddiv_selection']
    assert 0 <= selection['precision'] <= 1 and 0 <= selection['recall'] <= 1
    assert record['feddiv_relabelling']['clients'] <= len(sizes)
    assert abs(sum(record['feddiv_filter']['weights']) - 1) < 1e-9
  visited = [c for c in run.data.client_ids if run.store.get(c, 'labels') is not None]
  assert history[-1]['feddiv_relabelling']['changed'] == sum(  # The stored labels.
      int(np.sum(run.store.get(c, 'labels') != run.data.y[c])) for c in visited)
  assert [r['feddiv_filter']['clients'] for r in history[2:]] == [
      3, len(set(history[2]['clients']) | set(history[3]['clients']))]
  # The second filtering round splits with the filter the first one aggregated; its
  # revisited clients had one visit.
  assert any(history[3]['feddiv_split'][c]['visits'] == 1 for c in history[3]['clients']
             if c in history[2]['clients'])
  for cid in history[2]['clients']:  # Stored after the round, cleared selection.
    assert run.store.get(cid, algorithm.VISITS) >= 1
    assert len(run.store.get(cid, algorithm.DEBIASED)) == sizes[cid]
    assert not len(run.store.get(cid, algorithm.KEPT))
  fedavg = helpers.run_rounds(_digits(method='fedavg'))
  assert helpers.max_difference(run.final_weights(), fedavg.final_weights()) > 1e-4
  results = {'rounds': history}
  (line,) = SelectionSection().summary(results)
  assert line.startswith('FedDiv clean selection: precision ')
  (line,) = RelabellingSection().summary(results)
  assert line.startswith(f'FedDiv relabelling: {history[-1]["feddiv_relabelling"]["changed"]}')
  w = reporting.Writer('.')
  SelectionSection().render(w, {None: {'feddiv': [reporting.Run('.', 'feddiv', None, 1,
                                                                results)]}})
  assert w.lines[0] == '## FedDiv clean selection'


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
  """Labels, de-biased labels, priors, visits and local filters live in the store, the
  global filter in the server state: a restart after each filtering round changes nothing."""
  config = _digits()
  whole = helpers.run_rounds(config)
  resumed = helpers.run_with_restarts(config, str(tmp_path / 'ckpt'), restart_after=(2, 3))
  assert helpers.max_difference(whole.final_weights(), resumed.final_weights()) == 0
  for want, got in zip(whole.history, resumed.history):
    assert got.get('feddiv_split') == want.get('feddiv_split')
    assert got.get('feddiv_filter') == want.get('feddiv_filter')


@pytest.mark.slow
def test_feddiv_runs_equally_on_tff_and_tf():
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  for want, got in zip(runs['tff'].history, runs['tf'].history):
    assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=1e-3)
    assert got.get('feddiv_split') == want.get('feddiv_split')
