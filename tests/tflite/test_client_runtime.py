"""``fl.client_runtime: tflite``: the driver's clients train in the TFLite interpreter."""

import types

import helpers
import pytest

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import validation
from tff_noisy.config import ConfigError
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.maskedoptim import parts as masked_optim
from tff_noisy.runtime import tflite_clients
from tff_noisy.simulation import driver
from tflite_export import training


def _config(cache, runtime, **fl):
  return config_lib.from_dict({
      'seed': 0,
      'data': {'dataset': 'digits', 'cache_dir': str(cache)},
      'partition': {'num_clients': 4},
      'noise': {'name': 'symmetric', 'rate': 0.2},
      'model': {'name': 'mlp', 'width': 32},
      'fl': {'rounds': fl.pop('rounds', 2), 'clients_per_round': 3, 'batch_size': 32, 'client_lr': 0.1,
             'client_runtime': runtime, **fl},
  })


def test_bad_runtime_is_a_config_error():
  with pytest.raises(ConfigError, match="fl.client_runtime: unknown client runtime 'litert'; "
                                        "did you mean 'tflite'"):
    config_lib.from_dict({'fl': {'client_runtime': 'litert'}})


@pytest.mark.slow
def test_tflite_clients_match_tff_clients(tmp_path):
  """Two rounds of FedAvg (ReLU mlp, momentum, weight decay, 2 epochs), both runtimes."""
  fl = {'momentum': 0.9, 'weight_decay': 1e-3, 'local_epochs': 2}
  tff_run = driver.run_experiment(_config(tmp_path / 'c', 'tff', **fl),
                                  str(tmp_path / 'tff'), progress=False)
  lite_run = driver.run_experiment(_config(tmp_path / 'c', 'tflite', **fl),
                                   str(tmp_path / 'lite'), progress=False)
  for tff_round, lite_round in zip(tff_run.rounds, lite_run.rounds):
    assert lite_round['clients'] == tff_round['clients']
    assert lite_round['client_weights'] == tff_round['client_weights']
    assert lite_round['non_finite_clients'] == 0
    # ReLU masks flip on float rounding: close, not bit-equal.
    assert lite_round['train_loss'] == pytest.approx(tff_round['train_loss'], rel=1e-3)
    assert lite_round['train_accuracy'] == pytest.approx(tff_round['train_accuracy'],
                                                         abs=0.01)
    assert lite_round['test_accuracy'] == pytest.approx(tff_round['test_accuracy'],
                                                        abs=0.01)


@pytest.mark.slow
def test_ten_rounds_on_digits_end_within_half_a_point(tmp_path):
  def config(runtime):
    return config_lib.from_dict({
        'seed': 0, 'data': {'dataset': 'digits', 'cache_dir': str(tmp_path / 'c')},
        'partition': {'num_clients': 10}, 'model': {'name': 'mlp'},
        'fl': {'rounds': 10, 'participation': 0.5, 'client_runtime': runtime}})

  accuracies = {}
  for runtime in ('tff', 'tflite'):
    results = driver.run_experiment(config(runtime), str(tmp_path / runtime),
                                    progress=False)
    accuracies[runtime] = results.rounds[-1]['test_accuracy']
  print('10 rounds on digits, final test accuracy', accuracies)
  assert abs(accuracies['tflite'] - accuracies['tff']) <= 0.005


def test_a_method_that_cannot_train_on_devices_is_refused():
  for name in ('maskedoptim', 'lsc'):  # Up front, with the config (before any data).
    config = config_lib.from_dict({'data': {'dataset': 'digits'}, 'method': {'name': name},
                                   'fl': {'rounds': 40, 'client_runtime': 'tflite'}})
    with pytest.raises(ConfigError, match=f"^fl.client_runtime: tflite, but method '{name}' "
                       'cannot train on devices: .*; supported on devices: methods '
                       'fedavg, fedprox, label_smoothing, bi_tempered, sce, gce, '
                       '.*forward_correction$'):
      validation.validate_experiment(config)
  objective = ClientProgram([masked_optim.MaskedOptimLoss(10)])
  build = lambda faults: tflite_clients.TFLiteClients(  # pylint: disable=unnecessary-lambda-assignment
      None, None, objective, local_epochs=1, weight_decay=0.0, faults=faults)
  with pytest.raises(ConfigError, match="cannot be exported for on-device training: "
                     "client part MaskedOptimLoss has no on-device form"):
    build(False)
  with pytest.raises(ConfigError, match='fl.client_runtime: tflite does not simulate '
                     'faults'):
    build(True)


def test_the_registry_says_which_methods_train_on_devices():
  """Each method's ``MethodSpec.off_device`` agrees with its client parts' export check."""
  setup = types.SimpleNamespace(num_classes=10, client_lr=0.1, seed=0, rounds=1000,
                                weight_decay=0.0, model_fn=lambda: helpers.linear_model(4, 10))
  for name, spec in methods.METHODS.items():
    objective = ClientProgram(methods.METHODS[name].resolve()(spec.params(), setup).parts)
    if spec.off_device:
      with pytest.raises(ConfigError, match='cannot be exported for on-device training'):
        training.check_program(objective)
    else:
      training.check_program(objective)


@pytest.mark.slow
def test_one_round_on_devices(tmp_path):
  results = driver.run_experiment(_config(tmp_path / 'c', 'tflite', rounds=1),
                                  str(tmp_path / 'lite'), progress=False)
  (record,) = results.rounds
  assert record['non_finite_clients'] == 0 and record['train_loss'] > 0
  assert record['update_rejected'] == 0 and record['test_accuracy'] is not None
  assert results.config['fl']['client_runtime'] == 'tflite'
