"""The driver end to end on digits: results, determinism, resume, BN evaluation, errors."""
import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

import models
from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy.data import federated as federated_data
from tff_noisy.methods.confident_learning import algorithm as confident_learning
from tff_noisy.ops import confident_learning as cl_ops
from tff_noisy.simulation import driver
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation.client_state import ClientStateStore


def _config(**overrides):
  values = {
      'seed': 3,
      'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 4},
      'noise': {'name': 'symmetric', 'rate': 0.3, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp'},
      'fl': {'rounds': 4, 'participation': 0.5, 'batch_size': 32, 'client_lr': 0.1,
             'eval_every': 1, 'checkpoint_every': 2},
  }
  for key, value in overrides.items():
    section, _, name = key.rpartition('.')
    (values[section] if section else values)[name] = value
  return config_lib.from_dict(values)


def test_results_files_and_schema(tmp_path, tmp_cache):
  out = tmp_path / 'run'
  results = driver.run_experiment(_config(), str(out))
  saved = json.loads((out / 'results.json').read_text())
  assert saved['final_accuracy'] == results.final_accuracy
  assert len(saved['rounds']) == 4
  first = saved['rounds'][0]
  assert len(first['clients']) == 2 and len(first['client_weights']) == 2
  for key in ('train_loss', 'test_accuracy', 'test_macro_f1', 'seconds', 'wall_time'):
    assert key in first
  assert len(saved['client_noise_rates']) == 4
  assert (out / 'metrics.csv').read_text().count('\n') == 5
  assert os.listdir(out / 'tb')
  assert results.final_accuracy > 0.5  # Four rounds of FedAvg learn digits well above chance.


def test_evaluate_reports_each_class_accuracy():
  # Class 0 always right, class 1 half.
  y = np.array([0, 0, 1, 1])
  scores = driver.scores(np.eye(3)[[0, 0, 1, 0]], y)
  assert scores['test_class_accuracy'] == [1.0, 0.5, None]  # No class 2 in the split.
  assert scores['test_accuracy'] == 0.75


def test_logits_are_the_model_s_inference_call_in_batches():
  model = tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=(4,)),
                               tf.keras.layers.Dropout(0.5)])
  x = np.random.default_rng(0).normal(size=(2500, 4)).astype(np.float32)
  logits = driver.logits_of(model, x)  # Three batches, the last partial; dropout off.
  np.testing.assert_array_equal(logits, model.predict(x, batch_size=1024, verbose=0))
  np.testing.assert_array_equal(driver.logits_of(model, x[:7]),  # Traced once: any batch.
                                model.predict(x[:7], batch_size=1024, verbose=0))
  assert driver.logits_of(model, x[:0]).shape == (0, 3)


@pytest.mark.slow
def test_same_seed_same_accuracies(tmp_path, tmp_cache):
  first = driver.run_experiment(_config(), str(tmp_path / 'a'))
  second = driver.run_experiment(_config(), str(tmp_path / 'b'))
  assert [r['test_accuracy'] for r in first.rounds] == [r['test_accuracy'] for r in second.rounds]
  assert [r['clients'] for r in first.rounds] == [r['clients'] for r in second.rounds]


@pytest.mark.slow
def test_resume_after_crash_matches_uninterrupted_run(tmp_path, tmp_cache, killed_after_round):
  config = _config(**{'fl.rounds': 6})
  reference = driver.run_experiment(config, str(tmp_path / 'ref'))
  killed_after_round(4, lambda: driver.run_experiment(config, str(tmp_path / 'crashed')))
  resumed = driver.run_experiment(config, str(tmp_path / 'crashed'), resume=True)
  assert [r['round'] for r in resumed.rounds] == list(range(1, 7))
  keys = ('clients', 'train_loss', 'test_accuracy', 'test_macro_f1')
  for got, want in zip(resumed.rounds, reference.rounds):
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys}


@pytest.mark.slow
def test_batchnorm_global_model_evaluates_like_keras(tmp_path, tmp_cache):
  config = _config(**{'model.name': 'resnet20', 'model.norm': 'batch', 'fl.rounds': 2,
                      'data.train_subset': 400, 'data.test_subset': 200})
  results = driver.run_experiment(config, str(tmp_path / 'bn'))
  data = federated_data.build_federated_data(config)
  model = models.build_model('resnet20', data.input_shape, data.num_classes, norm='batch')
  model.set_weights(results_lib.load_final_weights(str(tmp_path / 'bn')))
  stats = [w.numpy() for w in model.non_trainable_weights if 'moving_mean' in w.name]
  assert stats and any(np.abs(s).max() > 0 for s in stats)  # Aggregated, not left at init.
  model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=['accuracy'])
  _, keras_accuracy = model.evaluate(data.x_test, data.y_test, verbose=0)
  assert results.final_accuracy == pytest.approx(keras_accuracy, abs=1e-6)


@pytest.mark.slow
def test_round_where_every_update_diverged_records_null_and_warns(tmp_path, tmp_cache,
                                                                  monkeypatch):
  real_build = federated_data.build_federated_data

  def with_nan_inputs(config, **kwargs):
    data = real_build(config, **kwargs)
    for cid in data.client_ids:
      data.x[cid] = np.full_like(data.x[cid], np.nan)
    return data

  monkeypatch.setattr(federated_data, 'build_federated_data', with_nan_inputs)
  warnings = []
  monkeypatch.setattr(driver, 'warn', warnings.append)
  results = driver.run_experiment(_config(**{'fl.rounds': 1}), str(tmp_path / 'nan'))
  record = results.rounds[0]
  assert record['train_loss'] is None and record['train_accuracy'] is None
  assert record['non_finite_clients'] == len(record['clients'])
  assert any('every client update was non-finite and rejected' in w for w in warnings)
  saved = json.loads((tmp_path / 'nan' / 'results.json').read_text())
  assert saved['rounds'][0]['train_loss'] is None  # null in the JSON, not 0.0.


@pytest.mark.slow
def test_empty_client_is_skipped_and_counted(tmp_path, tmp_cache, monkeypatch):
  real_build = federated_data.build_federated_data

  def with_empty_client(config, **kwargs):
    data = real_build(config, **kwargs)
    cid = data.client_ids[0]
    data.x[cid] = data.x[cid][:0]
    data.y[cid] = data.y[cid][:0]
    return data

  monkeypatch.setattr(federated_data, 'build_federated_data', with_empty_client)
  results = driver.run_experiment(
      _config(**{'fl.participation': 1.0, 'fl.rounds': 1}), str(tmp_path / 'e'))
  assert results.rounds[0]['skipped_empty_clients'] == 1
  assert len(results.rounds[0]['clients']) == 3


@pytest.mark.parametrize('overrides, match', [
    ({'fl': {'rounds': 0}}, 'fl.rounds'),
    ({'fl': {'participation': 1.5}}, 'fl.participation'),
    ({'fl': {'roundz': 3}}, "did you mean 'rounds'"),
    ({'fl': {'rounds': 'ten'}}, 'fl.rounds: expected an integer'),
    ({'method': {'name': 'fedavgg'}}, 'method.name'),
    ({'model': {'width': 0}}, 'model.width: needs an integer >= 1, got 0'),
    ({'model': {'width': 'wide'}}, 'model.width: expected an integer'),
    ({'method': {'name': 'fedprox', 'params': {'mu': -1}}}, 'method.params.mu'),
    ({'method': {'name': 'fedprox', 'params': {'nu': 1}}}, "did you mean 'mu'"),
    ({'device': 'tpu'}, "device: must be one of auto, cpu, gpu; got 'tpu'"),
    ({'device': 0}, 'device: expected a string'),
])
def test_bad_config_is_a_clear_error(overrides, match):
  with pytest.raises(config_lib.ConfigError, match=match):
    validation.validate_experiment(config_lib.from_dict(overrides))


def test_model_that_does_not_fit_the_data_fails_before_training(tmp_path, tmp_cache):
  with pytest.raises(config_lib.ConfigError, match='model.name'):
    driver.run_experiment(_config(**{'model.name': 'audio'}), str(tmp_path / 'x'))
  with pytest.raises(config_lib.ConfigError, match="model.width: not a parameter of 'small_cnn'"):
    driver.run_experiment(_config(**{'model.name': 'small_cnn', 'model.width': 64}),
                          str(tmp_path / 'x'))
  assert not (tmp_path / 'x').exists()


@pytest.mark.slow
@pytest.mark.parametrize('requested', ['cpu', 'auto'])
def test_results_record_the_device_used(tmp_path, tmp_cache, requested):
  if tf.config.list_physical_devices('GPU'):
    pytest.skip('a GPU is visible: auto would use it')
  out = tmp_path / requested
  results = driver.run_experiment(_config(**{'fl.rounds': 1, 'device': requested}), str(out))
  expected = {'requested': requested, 'used': 'cpu', 'gpus': [], 'tff_worker': 'cpu'}
  assert results.device == expected
  assert json.loads((out / 'results.json').read_text())['device'] == expected


def test_gpu_without_one_fails_before_any_data_work(tmp_path, tmp_cache, monkeypatch):
  if tf.config.list_physical_devices('GPU'):
    pytest.skip('a GPU is visible')

  def no_data_work(config):
    raise AssertionError('data built before the device was checked')

  monkeypatch.setattr(federated_data, 'build_federated_data', no_data_work)
  with pytest.raises(config_lib.ConfigError) as error:
    driver.run_experiment(_config(device='gpu', **{'fl.client_runtime': 'tf'}),
                          str(tmp_path / 'x'))
  message = str(error.value)
  assert message.startswith('device: gpu, but TensorFlow sees no GPU') and '\n' not in message
  assert not (tmp_path / 'x').exists() and not tmp_cache.exists()


@pytest.mark.slow
def test_mixed_noise_flip_kinds_are_recorded_beside_the_true_rates(tmp_path, tmp_cache):
  config = _config(**{'noise.name': 'mixed', 'noise.min_rate': 0.1, 'noise.max_rate': 0.5,
                      'noise.rate': 0.0, 'noise.noisy_fraction': 1.0,  # Not mixed's.
                      'fl.rounds': 1, 'fl.client_runtime': 'tf'})
  results = driver.run_experiment(config, str(tmp_path / 'mixed'), progress=False)
  assert list(results.client_flip_kinds) == list(results.client_noise_rates)
  assert list(results.client_flip_kinds.values()) == ['symmetric', 'pairflip'] * 2
  rates = list(results.client_noise_rates.values())
  assert 0.0 < rates[0] < rates[-1]
  assert driver.run_experiment(_config(**{'fl.rounds': 1}), str(tmp_path / 'fixed'),
                               progress=False).client_flip_kinds == {}


def test_client_datasets_hold_only_the_examples_a_method_keeps():
  x = {'a': np.arange(10, dtype=np.float32).reshape(5, 2), 'b': np.ones((3, 2), np.float32)}
  data = type('Data', (), {'x': x, 'y': {'a': np.arange(5), 'b': np.zeros(3, int)}})()
  plan = confident_learning.confident_learning(None, types.SimpleNamespace(seed=0)).data
  store = ClientStateStore()
  store.set_derived('a', cl_ops.LABEL_ISSUES, np.array([True, False, False, True, False]))
  store.set_derived('b', cl_ops.LABEL_ISSUES, np.ones(3, bool))  # Every label flagged.
  clients, weights = driver.client_datasets(plan, data, store, ['a', 'b'], [1, 2], 2)
  assert list(clients) == ['a'] and weights == {'a': 3.0}  # 'b' kept nothing: skipped.
  np.testing.assert_array_equal(clients['a'].features['y'], [1, 2, 4])
  np.testing.assert_array_equal(clients['a'].features['x'], x['a'][[1, 2, 4]])
  np.testing.assert_array_equal(clients['a'].features['index'], [0, 1, 2])


@pytest.mark.parametrize('field, value', [('client_lr', float('inf')), ('server_lr', float('inf')),
                                          ('client_lr', float('nan')),
                                          ('weight_decay', float('inf'))])
def test_learning_rates_must_be_finite(field, value):
  with pytest.raises(config_lib.ConfigError, match=f'fl.{field}: must be a finite number'):
    config_lib.from_dict({'fl': {field: value}})


@pytest.mark.slow
def test_a_global_model_that_becomes_non_finite_stops_the_run(tmp_path, tmp_cache):
  config = _config(**{'fl.rounds': 2, 'fl.server_lr': 1e38, 'fl.client_lr': 5.0,
                      'fl.client_runtime': 'tf'})
  with pytest.raises(driver.NonFiniteModelError, match=r'round 1: the global model became '
                                                      r'non-finite .* fl.server_lr=1e\+38'):
    driver.run_experiment(config, str(tmp_path / 'inf'), progress=False)
  assert not (tmp_path / 'inf' / 'results.json').exists()
  assert not (tmp_path / 'inf' / 'checkpoints').exists()


@pytest.mark.slow
def test_a_diverging_run_says_so_once_and_records_it(tmp_path, tmp_cache, monkeypatch):
  warnings = []
  monkeypatch.setattr(driver, 'warn', warnings.append)
  results = driver.run_experiment(
      _config(**{'fl.rounds': 3, 'fl.client_lr': 1e6, 'fl.client_runtime': 'tf'}),
      str(tmp_path / 'd'), progress=False)
  flagged = [r['round'] for r in results.rounds if r.get('diverging')]
  assert len(flagged) == 1
  assert sum('training is diverging' in w for w in warnings) == 1
  saved = json.loads((tmp_path / 'd' / 'results.json').read_text())
  assert saved['rounds'][flagged[0] - 1]['diverging'] is True
