"""FedDS wiring: reliability weights in a run, fallbacks, unreliable clients, errors."""
import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy.methods import recipe
from tff_noisy.methods.fedds import algorithm as fedds
from tff_noisy.simulation import assembly
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def _config(name='fedds', public_fraction=0.15, **params):
  return _validated({
      'seed': 0,
      'data': {'dataset': 'digits', 'public_fraction': public_fraction},
      'partition': {'name': 'iid', 'num_clients': 6},
      'noise': {'name': 'choice', 'rates': [0.0, 0.9], 'flip': 'symmetric'},
      'model': {'name': 'mlp'},
      'method': {'name': name, 'params': params},
      'fl': {'rounds': 2, 'participation': 1.0, 'local_epochs': 2, 'batch_size': 16,
             'client_lr': 0.05, 'momentum': 0.9, 'checkpoint_every': 2},
  })


def _validated(values):
  config = config_lib.from_dict(values)
  validation.validate_experiment(config)
  return config


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  cache = tmp_path_factory.mktemp('cache')
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv('TFF_NOISY_CACHE', str(cache))
    return driver.run_experiment(_config(), str(tmp_path_factory.mktemp('fedds')))


def test_weights_follow_reliability_and_track_true_noise(run):
  last = run.rounds[-1]
  weights = last['fedds_weights']
  assert sum(weights.values()) == pytest.approx(1.0)
  reliabilities = last['reliabilities']
  assert set(reliabilities) == set(last['clients'])
  total = sum(reliabilities.values())
  for cid, weight in weights.items():
    assert weight == pytest.approx(reliabilities[cid] / total, rel=1e-6)
  clean = [r for cid, r in reliabilities.items() if run.client_noise_rates[cid] < 0.5]
  noisy = [r for cid, r in reliabilities.items() if run.client_noise_rates[cid] >= 0.5]
  assert min(clean) > max(noisy)  # Rate-0.9 clients are the least reliable annotators.
  assert last['reliability_correlation'] > 0.8


class _Result:

  def __init__(self, update, weight):
    self.update, self.update_weight = update, weight


def _method(run_config):
  from tff_noisy.data import federated as federated_data  # pylint: disable=g-import-not-at-top
  data = federated_data.build_federated_data(run_config)
  built = assembly.build_method(run_config, data)
  weighting = built.recipe.weighting
  weighting.prepare(recipe.ServerContext(built.process, built.setup, data, None))
  weights = tff.learning.models.ModelWeights(
      trainable=[w.numpy() for w in built.setup.model_fn().trainable_weights],
      non_trainable=[])
  return weighting, weights


def _zeros_like(weights):
  return tff.learning.models.ModelWeights(
      trainable=[np.zeros_like(w) for w in weights.trainable], non_trainable=[])


def test_non_finite_client_is_unreliable_and_fewer_than_two_falls_back(tmp_cache):
  method, weights = _method(_config())
  zero = _zeros_like(weights)
  nan = tff.learning.models.ModelWeights(
      trainable=[np.full_like(w, np.nan) for w in weights.trainable], non_trainable=[])
  # A finite update whose public logits are NaN, and a client the client work zeroed.
  results = [_Result(zero, 50.0), _Result(nan, 40.0), _Result(zero, 0.0)]
  w, diagnostics = method.client_weights(['a', 'b', 'c'], results, weights)
  assert diagnostics['fedds_unreliable_clients'] == ['b', 'c']
  assert 'fedds_fallback' in diagnostics
  np.testing.assert_allclose(w, [50.0, 0.0, 0.0])


def test_missing_public_split_is_a_clear_error():
  with pytest.raises(config_lib.ConfigError, match='data.public_fraction'):
    _config(public_fraction=0.0)
  with pytest.raises(config_lib.ConfigError, match='method.params.weight_mode'):
    _config(weight_mode='votes')


def test_federated_em_gives_the_centralised_reliabilities(tmp_cache):
  from tff_noisy.ops import dawid_skene  # pylint: disable=g-import-not-at-top
  method, _ = _method(_config(em='federated', max_iter=40, tol=0.0))
  rng = np.random.default_rng(3)
  truth = rng.integers(0, 10, len(method.public_x))
  accuracies = [0.95, 0.8, 0.5, 0.2]
  predictions = [np.where(rng.random(truth.size) < a, truth, rng.integers(0, 10, truth.size))
                 for a in accuracies]
  federated, iterations = fedds.federated_dawid_skene(method.em, predictions, max_iter=40,
                                                      tol=0.0, use_prior=True)
  central = dawid_skene.dawid_skene(np.stack(predictions), 10, max_iter=40, tol=0.0)
  assert iterations == central.iterations == 40
  np.testing.assert_allclose(federated, central.reliability, atol=1e-6)
  assert list(np.argsort(federated)) == [3, 2, 1, 0]
