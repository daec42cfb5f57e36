"""Faulty clients through the driver on digits: dropouts, Byzantine clients, resume."""
import json

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import config as config_lib
from tff_noisy.data import federated as federated_data
from tff_noisy.ops import faults as faults_lib
from tff_noisy.simulation import client_state
from tff_noisy.simulation import assembly
from tff_noisy.simulation import driver
from tff_noisy.simulation import results as results_lib


def _config(faults, **fl):
  return config_lib.from_dict({
      'seed': 3, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 4}, 'model': {'name': 'mlp'},
      'fl': {'rounds': 2, 'participation': 1.0, 'batch_size': 32, 'client_lr': 0.1,
             'checkpoint_every': 2, **fl},
      'faults': faults,
  })


@pytest.mark.slow
def test_two_rounds_with_dropouts_and_nan_clients(tmp_path, tmp_cache):
  config = _config({'dropout': 0.25, 'byzantine': 0.5, 'behaviour': 'nan'})
  results = driver.run_experiment(config, str(tmp_path / 'run'))
  byzantine = results.byzantine_clients
  assert len(byzantine) == 2 and set(byzantine) < set(results.client_noise_rates)
  for record in results.rounds:
    assert len(record['dropped_clients']) == 1 and len(record['clients']) == 3
    assert not set(record['dropped_clients']) & set(record['clients'])
    assert record['byzantine_clients'] == [c for c in record['clients'] if c in byzantine]
    # A nan client's update never reaches the model: zeroed, weight 0, counted.
    assert record['non_finite_clients'] == len(record['byzantine_clients'])
    assert record['aggregator']['excluded_clients'] == len(record['byzantine_clients'])
    assert record['update_rejected'] == 0
  assert all(np.isfinite(w).all() for w in results_lib.load_final_weights(str(tmp_path / 'run')))
  saved = json.loads((tmp_path / 'run' / 'results.json').read_text())
  assert saved['byzantine_clients'] == byzantine
  assert saved['data_hash'] == _config({}).data_hash()  # Faults are not part of the data.
  again = driver.run_experiment(
      _config({'dropout': 0.25, 'byzantine': 0.5, 'behaviour': 'scale'}), str(tmp_path / 'b'))
  assert again.byzantine_clients == byzantine  # Fixed by the seed, whatever the behaviour.
  assert [r['dropped_clients'] for r in again.rounds] == [
      r['dropped_clients'] for r in results.rounds]


def _initial_weights(config):
  data = federated_data.build_federated_data(config)
  tf.keras.utils.set_random_seed(config.seed)
  return assembly.make_model_fn(config, data.input_shape, data.num_classes)().get_weights()


def test_round_without_reporters_leaves_the_model_and_warns_once(tmp_path, tmp_cache,
                                                                 monkeypatch):
  """A round whose sampled clients all drop (refused by validation for a config, so
  forced here past it) leaves the model as it was and warns once."""
  warnings = []
  monkeypatch.setattr(driver, 'warn', warnings.append)
  config = _config({'dropout': 0.25}, clients_per_round=2)
  monkeypatch.setattr(faults_lib, 'dropped_clients',  # Every sampled client drops.
                      lambda sampled, fraction, seed, round_num: list(sampled))
  results = driver.run_experiment(config, str(tmp_path / 'run'))
  assert [r['no_reporters'] for r in results.rounds] == [True, True]
  assert all(r['clients'] == [] and len(r['dropped_clients']) == 2 for r in results.rounds)
  assert len(warnings) == 1 and 'no client reported (2 dropped out' in warnings[0]
  for got, want in zip(results_lib.load_final_weights(str(tmp_path / 'run')),
                       _initial_weights(config)):
    np.testing.assert_array_equal(got, want)


def test_a_dropout_of_every_sampled_client_is_refused():
  with pytest.raises(config_lib.ConfigError, match='faults.dropout: 0.5 of the 1 client'):
    _config({'dropout': 0.5}, clients_per_round=1)


@pytest.mark.slow
def test_dropout_round_is_the_mean_over_the_reporters(tmp_path, tmp_cache):
  """The dropped clients' data is never built; the mean renormalises over the rest."""
  config = _config({'dropout': 0.5}, rounds=1)
  record = driver.run_experiment(config, str(tmp_path / 'run')).rounds[0]
  reporters = record['clients']
  assert len(reporters) == 2 and len(record['dropped_clients']) == 2
  plain = _config({}, rounds=1)
  data = federated_data.build_federated_data(plain)
  method = assembly.build_method(plain, data)
  weights = _initial_weights(plain)
  state = method.process.initialize()
  state = method.process.set_model_weights(state, tf.nest.pack_sequence_as(
      method.process.get_model_weights(state), weights))
  ids = list(data.client_ids)
  seeds = dict(zip(ids, np.random.default_rng([plain.seed, 1, 1]).integers(2**31, size=4)))
  datasets, _ = driver.client_datasets(method.recipe.data, data, client_state.ClientStateStore(), reporters,
                                       [seeds[c] for c in reporters], plain.fl.batch_size)
  output = method.process.next(state, list(datasets.values()), [()] * 2)
  model = method.setup.model_fn()
  method.process.get_model_weights(output.state).assign_weights_to(model)
  for got, want in zip(results_lib.load_final_weights(str(tmp_path / 'run')),
                       model.get_weights()):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_kill_and_resume_with_faults_equals_the_uninterrupted_run(tmp_path, tmp_cache,
                                                                  killed_after_round):
  config = _config({'dropout': 0.25, 'byzantine': 0.25, 'behaviour': 'gaussian', 'std': 0.05},
                   rounds=4)
  reference = driver.run_experiment(config, str(tmp_path / 'ref'))
  killed_after_round(2, lambda: driver.run_experiment(config, str(tmp_path / 'crashed')))
  resumed = driver.run_experiment(config, str(tmp_path / 'crashed'), resume=True)
  keys = ('clients', 'dropped_clients', 'byzantine_clients', 'train_loss', 'test_accuracy')
  assert [{k: r[k] for k in keys} for r in resumed.rounds] == [
      {k: r[k] for k in keys} for r in reference.rounds]
  assert any(r['byzantine_clients'] for r in reference.rounds)
  for got, want in zip(results_lib.load_final_weights(str(tmp_path / 'crashed')),
                       results_lib.load_final_weights(str(tmp_path / 'ref'))):
    np.testing.assert_array_equal(got, want)
