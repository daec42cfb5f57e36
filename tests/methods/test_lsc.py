"""LSC wiring: the client parts' process and step, the embeddings a run hands its clients."""
import types

import numpy as np
import pytest
import tensorflow as tf

import helpers
import models
from tff_noisy import config as config_lib
from tff_noisy.methods import lsc as lsc_params
from tff_noisy.methods.lsc import diagnostics as lsc_diagnostics
from tff_noisy import validation
from tff_noisy.data import federated as federated_data
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientContext, ClientProgram, CrossEntropy, Outputs
from tff_noisy.methods import recipe
from tff_noisy.methods.lsc import algorithm as lsc
from tff_noisy.methods.lsc.parts import KSimilarity
from tff_noisy.ops import contrastive
from tff_noisy.ops import contrastive_tf
from tff_noisy.ops import losses
from tff_noisy.simulation import client_state
from tff_noisy.simulation import assembly
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_CLASSES, _INPUTS, _FEATURES, _EMBEDDING = 3, 4, 6, 5


def _model_fn():
  inputs = tf.keras.Input((_INPUTS,))
  features = tf.keras.layers.Dense(_FEATURES, activation='tanh')(inputs)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(_CLASSES, name='logits')(features))


def _client(seed, n):
  rng = np.random.default_rng(seed)
  return (rng.normal(size=(n, _INPUTS)).astype(np.float32), rng.integers(0, _CLASSES, n),
          rng.normal(size=(n, _EMBEDDING)).astype(np.float32))


def _client_data(x, y, embedding=None, batch_size=16):
  extra = {} if embedding is None else {'embedding': embedding}
  return helpers.client_data(x, y, batch_size, **extra)


def _process(lam, lr=0.5):
  x, y, e = _client(0, 4)
  return process_lib.build_process(
      _model_fn, _client_data(x, y, e).dataset().element_spec,
      tff.learning.optimizers.build_sgdm(lr),
      program=ClientProgram([CrossEntropy(), KSimilarity(k=2, temperature=0.3, weight=lam)]))


@pytest.fixture(scope='module')
def lsc_process():
  return _process(lam=3.0)


@pytest.fixture(scope='module')
def fedavg_process():
  spec = _client_data(*_client(0, 4)[:2]).dataset().element_spec
  return process_lib.build_process(_model_fn, spec,
                                   tff.learning.optimizers.build_sgdm(0.5))


def _initial_state(process, model):
  return assembly.initial_state(process, model)


def test_type_signature_takes_the_embeddings_and_returns_fedavgs_update(lsc_process,
                                                                       fedavg_process):
  signature = lsc_process.train.type_signature
  features = signature.parameter[2].member.features  # Each client's examples.
  assert str(features.embedding) == f'float32[?,{_EMBEDDING}]'
  assert str(features) == ('<x=float32[?,4],y=int64[?],index=int64[?],'
                           f'embedding=float32[?,{_EMBEDDING}]>')
  results, metrics, states = signature.result
  assert results.placement is tff.CLIENTS and metrics.placement is tff.SERVER
  assert str(states.member) == '<>'  # No client state.
  # Nothing more is sent than FedAvg's update and metrics.
  assert fedavg_process.train.type_signature.result == signature.result


def test_one_step_equals_ce_plus_lambda_times_the_numpy_term(lsc_process):
  tf.keras.utils.set_random_seed(0)
  model = _model_fn()
  x, y, e = _client(1, 10)
  out = lsc_process.next(_initial_state(lsc_process, model), [_client_data(x, y, e)], [()])
  features_of = models.features_and_logits(model)
  features, logits = (t.numpy() for t in features_of(x))
  per_example = (losses.cross_entropy(y, logits).numpy()
                 + 3.0 * contrastive.k_similarity_loss(features, e, 2, 0.3))
  train = out.metrics['client_work']['train']
  assert float(train['loss']) == pytest.approx(per_example.mean(), rel=1e-5)
  variables = model.trainable_variables  # One batch, one SGD step on the mean loss.
  with tf.GradientTape() as tape:
    f, l = features_of(x)
    loss = tf.reduce_mean(losses.cross_entropy(y, l)
                          + 3.0 * contrastive_tf.k_similarity_loss(f, e, 2, 0.3))
  gradients = tape.gradient(loss, variables)
  expected = [v.numpy() - 0.5 * g.numpy() for v, g in zip(variables, gradients)]
  got = lsc_process.get_model_weights(out.state).trainable
  for w, want in zip(got, expected):
    np.testing.assert_allclose(w, want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_the_term_changes_the_update_and_lambda_zero_is_fedavg(lsc_process, fedavg_process):
  tf.keras.utils.set_random_seed(2)
  model = _model_fn()
  x, y, e = _client(3, 21)  # Batches of 16 and 5.
  zero = _process(lam=0.0)
  weights = lambda p, data: [w for w in p.get_model_weights(p.next(
      _initial_state(p, model), [data], [()]).state).trainable]
  reference = weights(fedavg_process, _client_data(x, y))
  for a, b in zip(weights(zero, _client_data(x, y, e)), reference):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  contrasted = weights(lsc_process, _client_data(x, y, e))
  assert max(np.abs(a - b).max() for a, b in zip(contrasted, reference)) > 1e-3


def test_k_similarity_without_embeddings_is_a_clear_error():
  program = ClientProgram([CrossEntropy(), KSimilarity(k=2, temperature=0.3, weight=1.0)])
  batch = {'x': tf.zeros([2, 4]), 'y': tf.zeros([2], tf.int64)}
  with pytest.raises(ValueError, match="needs the per-example field 'embedding'"):
    program.loss(batch, Outputs(tf.zeros([2, 3]), tf.zeros([2, 6])), ClientContext({}))


# Through the driver, on digits.

def _config(model='mlp', rounds=3, **params):
  config = config_lib.from_dict({
      'seed': 2, 'data': {'dataset': 'digits'},
      'partition': {'name': 'fedcorr', 'num_clients': 4, 'class_prob': 0.7, 'alpha': 5.0},
      'noise': {'name': 'fedcorr', 'rho': 0.5, 'tau': 0.2},
      'model': {'name': model, 'width': 16} if model == 'mlp' else {'name': model},
      'method': {'name': 'lsc', 'params': params},
      'fl': {'rounds': rounds, 'participation': 0.5, 'local_epochs': 2, 'batch_size': 20,
             'client_lr': 0.05, 'momentum': 0.0, 'weight_decay': 3e-4, 'checkpoint_every': 3},
  })
  validation.validate_experiment(config)
  return config


@pytest.mark.slow
def test_lsc_run_trains_and_reports_the_neighbour_purity(tmp_path, tmp_cache):
  config = _config(pca_components=8)
  results = driver.run_experiment(config, str(tmp_path / 'run'))
  assert len(results.rounds) == 3
  assert all(np.isfinite(r['train_loss']) and r['non_finite_clients'] == 0
             for r in results.rounds)
  assert results.final_accuracy > 0.3  # Digits, three short rounds: well above chance.
  report = results.extra['lsc']
  assert report['embedding_width'] == 8 and report['k'] == 4
  assert report['purity_batch_size'] == 20
  # PCA neighbours of digits share the true class far above the batch's chance level.
  assert report['neighbour_purity'] > report['same_label_chance'] + 0.3
  assert (tmp_cache / 'embeddings').is_dir()


def test_purity_uses_the_true_labels_and_the_batches():
  rng = np.random.default_rng(0)
  labels = np.repeat([0, 1], 10)
  embeddings = np.eye(2)[labels] + 0.01 * rng.normal(size=(20, 2))
  counts = lsc_diagnostics.in_batch_purity(embeddings, labels, 3, 20, rng)
  assert counts.tolist() == [60, 60, 180, 380]  # Neighbours all alike; 9 of 19 others.
  small = lsc_diagnostics.in_batch_purity(embeddings, labels, 3, 3, rng)  # K clipped to 2 per batch.
  assert small[1] == 6 * 3 * 2 + 2 * 1


@pytest.mark.slow
def test_classifier_architecture_is_independent_of_the_encoders(tmp_cache):
  config = _config(pca_components=8)
  data = federated_data.build_federated_data(config)
  cid = data.client_ids[0]
  built = {}
  for params in ({'pca_components': 8}, {'encoder': 'random'}):
    method = assembly.build_method(_config(**params), data)
    store = client_state.ClientStateStore()
    embeddings = _prepared(method, data, store)
    model = method.setup.model_fn()
    built[embeddings.params.encoder] = (method.setup.element_spec['embedding'].shape[-1],
                                    store.get(cid, 'embedding').shape[1],
                                    models.feature_dim(model),
                                    [w.shape for w in model.get_weights()])
  assert built['pca'][:3] == (8, 8, 16)
  assert built['random'][:3] == (128, 128, 16)
  assert built['pca'][3] == built['random'][3]  # The same client model for both.


def test_missing_or_miscounted_embeddings_are_clear_errors(tmp_cache):
  config = _config(pca_components=8)
  data = federated_data.build_federated_data(config)
  method = assembly.build_method(config, data)
  store = client_state.ClientStateStore()
  cid = data.client_ids[0]
  n = len(data.y[cid])
  plan = method.recipe.data
  with pytest.raises(ValueError, match=f"client {cid}: no 'embedding' values"):
    plan.extras(cid, n, store)
  _prepared(method, data, store)
  assert plan.extras(cid, n, store)['embedding'].shape == (n, 8)
  np.testing.assert_array_equal(plan.labels(cid, data, store), data.y[cid])  # Observed.
  np.testing.assert_allclose(np.linalg.norm(store.get(cid, 'embedding'), axis=1), 1.0,
                             rtol=1e-5)
  store.set_derived(cid, 'embedding', store.get(cid, 'embedding')[1:])
  with pytest.raises(ValueError, match=rf"client {cid}: 'embedding' has shape \({n - 1}, 8\) "
                                       rf'but its dataset needs \({n}, 8\)'):
    plan.extras(cid, n, store)


def _prepared(method, data, store):
  """LSC's server step, prepared on ``store``: every client's embeddings in it."""
  (embeddings,) = method.recipe.server
  embeddings.prepare(recipe.ServerContext(method.process, method.setup, data, store))
  return embeddings


@pytest.mark.parametrize('params, shape, match', [
    ({'pca_components': 65}, (8, 8, 1), 'method.params.pca_components: needs at most 64'),
    ({'encoder': 'random'}, (64,), "method.params.encoder: 'random' needs images"),
])
def test_an_encoder_that_does_not_fit_the_data_is_a_config_error(params, shape, match):
  data = types.SimpleNamespace(input_shape=shape, client_ids=['0'], y={'0': np.zeros(100)})
  recipe_of = lsc.lsc(lsc_params.LSCParams(**params), None)
  with pytest.raises(config_lib.ConfigError, match=match):
    recipe_of.data.field_specs(data)
