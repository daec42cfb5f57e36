"""``ClientData``: one pipeline's batch orders equal each client's own ``tf.data`` order."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.federated import client_data


def _clients(sizes, batch_size=4):
  rng = np.random.default_rng(0)
  return [client_data.make_client_data(rng.random((n, 3)), rng.integers(0, 5, n), batch_size,
                                       int(rng.integers(2**31))) for n in sizes]


def _dataset_order(client, passes):
  indices = [batch['index'] for batch in client.dataset().repeat(passes).as_numpy_iterator()]
  return np.concatenate(indices) if indices else np.zeros(0, np.int64)


@pytest.mark.parametrize('global_seed', [None, 0, 7])
@pytest.mark.parametrize('passes', [1, 3])
def test_batch_orders_equal_each_clients_dataset(global_seed, passes):
  """Global seed 0 is the case public ``Dataset.shuffle`` cannot take a tensor seed in."""
  if global_seed is not None:
    tf.keras.utils.set_random_seed(global_seed)
  clients = _clients([0, 1, 3, 4, 9, 17])
  orders = client_data.batch_orders(clients, passes)
  for client, order in zip(clients, orders):
    np.testing.assert_array_equal(order, _dataset_order(client, passes))
  assert [len(o) for o in orders] == [passes * c.num_examples for c in clients]
  # Every pass is a permutation, reshuffled: not all passes alike.
  order = orders[-1].reshape(passes, -1)
  assert all(sorted(p) == list(range(17)) for p in order)
  if passes > 1:
    assert not all(np.array_equal(order[0], p) for p in order[1:])


def test_make_client_data_fields_and_dataset():
  client = client_data.make_client_data(np.ones((5, 2), np.float64), np.arange(5), 2, 3,
                                        {'aggregation_weight': np.full(5, 0.5, np.float32)})
  assert list(client.features) == ['x', 'y', 'index', 'aggregation_weight']
  assert client.features['x'].dtype == np.float32 and client.features['y'].dtype == np.int64
  assert [len(b['y']) for b in client.dataset().as_numpy_iterator()] == [2, 2, 1]
  assert client_data.as_dataset(client).element_spec == client.dataset().element_spec
  dataset = client.dataset()
  assert client_data.as_dataset(dataset) is dataset


@pytest.mark.parametrize('n', [0, 1, 7, 8, 9, 33])
def test_steps_per_pass_counts_the_datasets_batches(n):
  client = client_data.make_client_data(np.zeros((n, 2)), np.zeros(n), batch_size=8,
                                        shuffle_seed=0)
  assert client_data.steps_per_pass(n, 8) == len(list(client.dataset()))


@pytest.mark.parametrize('global_seed', [None, 0, 3])
@pytest.mark.parametrize('shuffle_seed', [0, 1, 2**31 - 1, 2**31, 2**63 - 1])
def test_dataset_shuffles_as_a_python_int_seed_would(global_seed, shuffle_seed):
  """``dataset()`` hands the shuffle its seed as a tensor (no Python scalar for TensorFlow
  to cache); the order is the one ``shuffle(n, seed=int)`` gives, edge seeds included."""
  if global_seed is not None:
    tf.keras.utils.set_random_seed(global_seed)
  client = client_data.make_client_data(np.zeros((9, 2)), np.arange(9) % 3, 4, shuffle_seed)
  expected = tf.data.Dataset.range(9).shuffle(9, seed=shuffle_seed).repeat(2)
  np.testing.assert_array_equal(_dataset_order(client, 2), list(expected.as_numpy_iterator()))


def test_unshuffled_client_keeps_its_order_every_pass():
  client = client_data.make_client_data(np.zeros((5, 2)), np.arange(5), 2, shuffle_seed=None)
  np.testing.assert_array_equal(_dataset_order(client, 2), np.tile(np.arange(5), 2))
  np.testing.assert_array_equal(client_data.batch_orders([client], 2)[0],
                                np.tile(np.arange(5), 2))


@pytest.mark.parametrize('global_seed', [None, 4])
def test_pipeline_built_in_a_tff_graph_yields_the_drivers_batches(global_seed):
  """TFF's client work builds each client's dataset in its own graph from
  ``pipeline_input()``: every pass the same batches as the driver's ``dataset()`` (whose
  seed pair reads the driver's global seed, which the graph does not have)."""
  from tff_noisy.tff_runtime import import_tff  # pylint: disable=g-import-not-at-top
  tff = import_tff()
  if global_seed is not None:
    tf.keras.utils.set_random_seed(global_seed)
  clients = _clients([1, 6, 11], batch_size=4)
  spec = client_data.pipeline_input_spec(clients[0].dataset().element_spec)

  @tf.function  # Orders the passes, as the client work's training function does.
  def passes(dataset):
    def indices():  # One pass: its batches' indices, each batch padded to 4 with -1.
      return dataset.reduce(tf.zeros([0, 4], tf.int64), lambda acc, batch: tf.concat(
          [acc, tf.pad(batch['index'], [[0, 4 - tf.shape(batch['index'])[0]]],
                       constant_values=-1)[None]], 0))
    return indices(), indices()

  @tff.tensorflow.computation(tff.types.tensorflow_to_type(spec))
  def two_passes(data):
    return passes(client_data.batched_pipeline(**data))

  for client, order in zip(clients, client_data.batch_orders(clients, 2)):
    got = np.concatenate([np.asarray(p).ravel() for p in two_passes(client.pipeline_input())])
    np.testing.assert_array_equal(got[got >= 0], order)
    np.testing.assert_array_equal(got[got >= 0], _dataset_order(client, 2))
