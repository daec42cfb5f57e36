"""The federated process: type signatures first, then numbers against plain Keras/NumPy."""
import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy.federated import client_work
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy, Proximal
from tff_noisy.simulation import assembly
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def _model_fn():
  return tf.keras.Sequential([
      tf.keras.layers.Input((4,)),
      tf.keras.layers.Dense(3, kernel_initializer='glorot_uniform'),
      tf.keras.layers.BatchNormalization(),
  ])


def _client_data(x, y, batch_size=100, weight=None):
  extra = {} if weight is None else {
      client_work.AGGREGATION_WEIGHT_KEY: np.full(len(y), weight, np.float32)}
  return helpers.client_data(x, y, batch_size, **extra)


def _client(seed, n):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(n, 4)), rng.integers(0, 3, n)


def _build(spec, program=None):
  return process_lib.build_process(_model_fn, spec, tff.learning.optimizers.build_sgdm(0.5),
                                   program=program)


def _next(process, state, datasets):
  """A round of stateless client parts (every client's state is ``()``)."""
  return process.next(state, datasets, [()] * len(datasets))


@pytest.fixture(scope='module')
def process():
  return _build(_client_data(*_client(0, 2)).dataset().element_spec)


@pytest.fixture(scope='module')
def weighted_process():
  return _build(_client_data(*_client(0, 2), weight=1.0).dataset().element_spec)


def _state_with(process, model):
  return assembly.initial_state(process, model)


def _keras_client_result(model, x, y, lr):
  """One full-batch SGD step in plain Keras, from the model's current weights."""
  local = _model_fn()
  local.set_weights(model.get_weights())
  with tf.GradientTape() as tape:
    logits = local(x.astype(np.float32), training=True)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
  grads = tape.gradient(loss, local.trainable_variables)
  for v, g in zip(local.trainable_variables, grads):
    v.assign_sub(lr * g)
  return local.get_weights()


def test_type_signature(process):
  signature = process._next.type_signature  # pylint: disable=protected-access
  state, data, client_states = signature.parameter
  assert data.placement is tff.CLIENTS and client_states.placement is tff.CLIENTS
  assert not client_states.member  # Cross-entropy keeps no state: an empty struct.
  assert len(state.member.global_model_weights.non_trainable) == 2  # BN moving mean/var
  new_state, metrics, new_client_states = signature.result
  assert new_state.placement is tff.SERVER and new_client_states.placement is tff.CLIENTS
  assert set(tff.structure.name_list(metrics.member.client_work.train)) == {
      'loss', 'accuracy', 'client_mean_accuracy', 'num_examples', 'non_finite_clients'}
  assert set(tff.structure.name_list(metrics.member)) == {'client_work', 'aggregator',
                                                          'finalizer'}


def test_round_equals_weighted_mean_of_keras_clients_including_bn_statistics(process):
  tf.keras.utils.set_random_seed(1)
  model = _model_fn()
  (xa, ya), (xb, yb) = _client(1, 30), _client(2, 90)
  out = _next(process, _state_with(process, model), [_client_data(xa, ya), _client_data(xb, yb)])
  expected_a = _keras_client_result(model, xa, ya, 0.5)
  expected_b = _keras_client_result(model, xb, yb, 0.5)
  expected = [(30 * a + 90 * b) / 120 for a, b in zip(expected_a, expected_b)]
  global_model = _model_fn()
  process.get_model_weights(out.state).assign_weights_to(global_model)
  for got, want in zip(global_model.get_weights(), expected):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
  moving_mean = global_model.layers[-1].moving_mean.numpy()
  assert not np.allclose(moving_mean, 0.0)  # BN statistics were aggregated, not dropped.
  assert out.metrics['client_work']['train']['num_examples'] == 120


def test_non_finite_client_never_reaches_global_model(process):
  tf.keras.utils.set_random_seed(2)
  model = _model_fn()
  xa, ya = _client(3, 40)
  xb, yb = _client(4, 40)
  xb[0, 0] = np.nan
  out = _next(process, _state_with(process, model), [_client_data(xa, ya), _client_data(xb, yb)])
  expected = _keras_client_result(model, xa, ya, 0.5)
  global_model = _model_fn()
  process.get_model_weights(out.state).assign_weights_to(global_model)
  for got, want in zip(global_model.get_weights(), expected):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
  assert out.metrics['client_work']['train']['non_finite_clients'] == 1


def test_all_clients_non_finite_leaves_model_unchanged(process):
  tf.keras.utils.set_random_seed(3)
  model = _model_fn()
  x, y = _client(5, 10)
  x[:] = np.inf
  state = _state_with(process, model)
  out = _next(process, state, [_client_data(x, y)])
  assert out.metrics['finalizer']['update_non_finite'] == 1
  before = process.get_model_weights(state)
  after = process.get_model_weights(out.state)
  for a, b in zip(tf.nest.flatten(before), tf.nest.flatten(after)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_aggregation_weight_sets_the_update_weight(weighted_process):
  tf.keras.utils.set_random_seed(4)
  model = _model_fn()
  (xa, ya), (xb, yb) = _client(6, 50), _client(7, 50)
  out = _next(weighted_process, _state_with(weighted_process, model),
              [_client_data(xa, ya, weight=0.9), _client_data(xb, yb, weight=0.1)])
  expected_a = _keras_client_result(model, xa, ya, 0.5)
  expected_b = _keras_client_result(model, xb, yb, 0.5)
  global_model = _model_fn()
  weighted_process.get_model_weights(out.state).assign_weights_to(global_model)
  for got, a, b in zip(global_model.get_weights(), expected_a, expected_b):
    np.testing.assert_allclose(got, 0.9 * a + 0.1 * b, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_fedprox_pulls_towards_global_model():
  x, y = _client(8, 64)
  spec = _client_data(x, y).dataset().element_spec
  tf.keras.utils.set_random_seed(5)
  model = _model_fn()

  def distance(process):
    out = _next(process, _state_with(process, model), [_client_data(x, y, batch_size=8)])
    after = process.get_model_weights(out.state).trainable
    return sum(np.sum((a - b) ** 2) for a, b in zip(after, model.get_weights()))

  plain = distance(_build(spec))
  prox = distance(_build(spec, ClientProgram([CrossEntropy(), Proximal(1.0)])))
  assert prox < 0.8 * plain
  for mu in (-1.0, 0.0):
    with pytest.raises(ValueError, match='mu must be > 0'):
      Proximal(mu)
