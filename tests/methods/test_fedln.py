"""FedLN wiring: the scoring computation, NA-FedAvg weights and NNC labels in a run."""

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy import config as config_lib
from tff_noisy.embeddings import encoders
from tff_noisy.methods import fedln as fedln_params
from tff_noisy import validation
from tff_noisy.data import federated as federated_data
from tff_noisy.federated import probe
from tff_noisy.federated import process as process_lib
from tff_noisy.methods import recipe
from tff_noisy.methods.fedln import algorithm as fedln
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def _client_data(seed, n):
  x, y = helpers.random_client(seed, n)
  return helpers.client_data(x, y, batch_size=8, aggregation_weight=np.ones(n, np.float32))


@pytest.mark.slow
def test_scoring_returns_global_and_trained_local_logits():
  data = [_client_data(1, 20), _client_data(2, 12)]
  datasets = [d.dataset() for d in data]
  spec = datasets[0].element_spec
  setup = recipe.Setup(
      model_fn=helpers.linear_model, element_spec=spec,
      client_optimizer=tff.learning.optimizers.build_sgdm(0.3),
      server_optimizer=tff.learning.optimizers.build_sgdm(1.0),
      aggregator=tff.aggregators.MeanFactory(), local_epochs=2, weight_decay=0.0, seed=0,
      rounds=1, num_classes=3)
  parts = [CrossEntropy()]
  program = ClientProgram(parts)
  scoring = probe.build_probe(helpers.linear_model, spec,
                              fedln._before_and_after_training(setup, program))  # pylint: disable=protected-access
  process = process_lib.build_process(helpers.linear_model, spec,
                                     setup.client_optimizer, program=program, local_epochs=2)
  tf.keras.utils.set_random_seed(0)
  model = helpers.linear_model()
  weights = tff.learning.models.ModelWeights(
      trainable=[v.numpy() for v in model.trainable_variables], non_trainable=[])
  logits = scoring(weights, datasets)
  assert [g.shape for g, _ in logits] == [(20, 3), (12, 3)]
  x = np.concatenate([b['x'] for b in datasets[0].as_numpy_iterator()])
  np.testing.assert_allclose(logits[0][0], model(x).numpy(), rtol=1e-5, atol=1e-5)
  # The local model scored is the one the round trains: for one client, global - update.
  state = process.set_model_weights(process.initialize(), weights)
  trained = process.get_model_weights(process.next(state, [data[0]], [()]).state)
  trained.assign_weights_to(model)
  np.testing.assert_allclose(logits[0][1], model(x).numpy(), rtol=1e-4, atol=1e-4)
  # In this process (the tf runtime's probes), the same logits.
  in_process = probe.build_probe(helpers.linear_model, spec,
                                 fedln._before_and_after_training(setup, program),  # pylint: disable=protected-access
                                 in_process=True)
  for (g, local), (g_here, local_here) in zip(logits, in_process(weights, datasets)):
    np.testing.assert_allclose(g_here, g, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(local_here, local, rtol=1e-5, atol=1e-5)


def _fedln_config(name, **params):
  return _validated({
      'seed': 1,
      'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 4},
      'noise': {'name': 'fedln', 'level': 0.7, 'sparsity': 0.0, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp'},
      'method': {'name': name, 'params': params},
      'fl': {'rounds': 3, 'participation': 0.5, 'batch_size': 32, 'client_optimizer': 'adam',
             'client_lr': 0.003, 'checkpoint_every': 3},
  })


def _validated(values):
  config = config_lib.from_dict(values)
  validation.validate_experiment(config)
  return config


@pytest.mark.slow
def test_fedln_run_estimates_noise_weights_clients_and_corrects_labels(tmp_path, tmp_cache):
  config = _fedln_config('fedln', k=10, pca_components=10, activation_round=2)
  results = driver.run_experiment(config, str(tmp_path / 'run'))
  activation = results.rounds[1]
  assert len(activation['clients']) == 4  # Every client takes part at R_c.
  estimates = activation['noise_estimates']
  assert set(estimates) == set(activation['clients'])
  assert all(0.0 <= e <= 1.0 for e in estimates.values())
  assert 'noise_estimate_correlation' in activation
  sizes = {cid: len(y) for cid, y in federated_data.build_federated_data(config).y.items()}
  first = results.rounds[0]
  assert first['client_weights'] == [float(sizes[cid]) for cid in first['clients']]
  for record in results.rounds[1:]:  # From R_c on: (1 - n_hat) N.
    for cid, weight in zip(record['clients'], record['client_weights']):
      assert weight == pytest.approx((1 - estimates[cid]) * sizes[cid], rel=1e-5)
  report = results.extra['label_correction']['overall']
  assert report['noise_before'] > 0.3
  assert 0.0 < report['fraction_changed'] < 1.0


@pytest.mark.slow
def test_nnc_only_run_has_no_estimation_round(tmp_path, tmp_cache):
  results = driver.run_experiment(_fedln_config('fedln_nnc', k=10, pca_components=10),
                                  str(tmp_path / 'nnc'))
  assert all('noise_estimates' not in r for r in results.rounds)
  assert 'label_correction' in results.extra


@pytest.mark.parametrize('params, match', [
    ({'k': 0}, 'method.params.k'),
    ({'nu': 100}, 'method.params.nu'),
    ({'activation_round': 9}, r'activation_round: needs a round within fl.rounds=3'),
    ({'temperature': 0}, 'method.params.temperature'),
    ({'pca_sqrt': 'yes'}, 'method.params.pca_sqrt'),
])
def test_bad_fedln_params_are_clear_errors(params, match):
  with pytest.raises(config_lib.ConfigError, match=match):
    _fedln_config('fedln', **params)


def test_sqrt_pca_of_negative_inputs_is_a_clear_error():
  params = fedln_params.NNCParams(encoder='pca', pca_components=2, pca_sqrt=True)
  with pytest.raises(config_lib.ConfigError, match='method.params.pca_sqrt: needs inputs >= 0'):
    encoders.build_encoder(params, np.full((8, 3), -0.5, np.float32), seed=0)


def test_unloadable_hub_encoder_is_a_clear_error(tmp_path, tmp_cache):
  from tff_noisy.embeddings import hub  # pylint: disable=g-import-not-at-top
  config = _fedln_config('fedln_nnc', encoder=str(tmp_path / 'missing_encoder'))
  with pytest.raises(hub.EncoderLoadError, match='missing_encoder'):
    driver.run_experiment(config, str(tmp_path / 'x'))


@pytest.mark.slow
def test_private_threshold_estimates_match_pooled_ones(tmp_path, tmp_cache):
  pooled = driver.run_experiment(
      _fedln_config('fedln_nafedavg', activation_round=2), str(tmp_path / 'pooled'))
  private = driver.run_experiment(
      _fedln_config('fedln_nafedavg', activation_round=2, threshold='private',
                    score_range=[-20.0, 40.0], score_bins=6000), str(tmp_path / 'private'))
  a, b = pooled.rounds[1], private.rounds[1]
  assert b['noise_threshold'] == pytest.approx(a['noise_threshold'], abs=0.01)
  for cid, estimate in a['noise_estimates'].items():
    assert b['noise_estimates'][cid] == pytest.approx(estimate, abs=0.01)
