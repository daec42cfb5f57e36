"""Byzantine clients inside the federated process: signatures, then numbers against NumPy."""

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.aggregators import coordinate_median
from tff_noisy.federated.aggregators import mean
from tff_noisy.ops import faults
from tff_noisy.ops import faults_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def _client_data(seed, n=20):
  return helpers.client_data(*helpers.random_client(seed, n), batch_size=10)


def _build(with_faults, aggregator=None):
  return process_lib.build_process(
      helpers.linear_model, _client_data(0).dataset().element_spec,
      tff.learning.optimizers.build_sgdm(0.5),
      model_aggregator=aggregator, faults=with_faults)


@pytest.fixture(scope='module')
def processes():
  return _build(False), _build(True, mean.MeanAggregatorFactory())


def _flat(weights):
  return [np.asarray(w) for w in weights.trainable + weights.non_trainable]


def _spec(behaviour, seed=1):
  return faults.fault_spec(behaviour, 10.0, 0.5, seed)


def test_signatures_without_and_with_faults(processes):
  plain, faulty = processes
  assert len(plain.train.type_signature.parameter) == 4
  assert not plain.takes_faults and faulty.takes_faults
  fault_type = faulty.train.type_signature.parameter[4]
  assert str(fault_type) == '{<kind=int32,factor=float32,std=float32,seed=int64>}@CLIENTS'
  assert faulty.train.type_signature.result == plain.train.type_signature.result
  assert faulty.initialize_computation.type_signature == plain.initialize_computation.type_signature
  with pytest.raises(ValueError, match="built with faults: give each client's fault"):
    faulty.next(faulty.initialize(), [_client_data(1)], [()])
  with pytest.raises(ValueError, match='built without faults: give none'):
    plain.next(plain.initialize(), [_client_data(1)], [()], [_spec(None)])


def _honest_updates(process, state, datasets):
  results, _, _ = process.train_clients(process.get_model_weights(state),
                                        process.get_hparams(state), datasets,
                                        [()] * len(datasets))
  return [_flat(r.update) for r in results], [float(r.update_weight) for r in results]


@pytest.mark.slow
def test_corrupted_updates_reach_the_aggregate_as_numpy_computes_them(processes):
  plain, faulty = processes
  state = plain.initialize()
  datasets = [_client_data(i, n) for i, n in ((1, 20), (2, 30), (3, 40), (4, 20))]
  updates, weights = _honest_updates(plain, state, datasets)
  specs = [_spec(None), _spec('scale'), _spec('sign_flip'), _spec('nan')]
  out = faulty.next(state, datasets, [()] * 4, specs)
  sent = [faults.corrupt(u, s) for u, s in zip(updates, specs)]
  # The nan client is zeroed with weight 0; the mean renormalises over the other three.
  expected = [sum(w * s[i] for w, s in zip(weights[:3], sent[:3])) / sum(weights[:3])
              for i in range(len(updates[0]))]
  before = _flat(plain.get_model_weights(state))
  after = _flat(faulty.get_model_weights(out.state))
  for b, a, e in zip(before, after, expected):
    np.testing.assert_allclose(b - a, e, rtol=1e-5, atol=1e-6)
  train = out.metrics['client_work']['train']
  assert int(train['non_finite_clients']) == 1
  assert int(train['num_examples']) == 90  # Honest metrics of the three finite clients.
  assert int(out.metrics['aggregator']['excluded_clients']) == 1


def test_gaussian_update_is_the_twins_draw(processes):
  plain, faulty = processes
  state = plain.initialize()
  updates, _ = _honest_updates(plain, state, [_client_data(1)])
  spec = _spec('gaussian', seed=12345)
  results, _, _ = faulty.train_clients(faulty.get_model_weights(state),
                                       faulty.get_hparams(state), [_client_data(1)], [()], [spec])
  want = [np.asarray(t) for t in faults_tf.corrupt([tf.constant(u) for u in updates[0]], spec)]
  for got, w in zip(_flat(results[0].update), want):
    np.testing.assert_array_equal(got, w)
  again, _, _ = faulty.train_clients(faulty.get_model_weights(state),
                                     faulty.get_hparams(state), [_client_data(1)], [()], [spec])
  for got, w in zip(_flat(again[0].update), want):
    np.testing.assert_array_equal(got, w)  # Seeded: a resumed round repeats it.


def test_honest_clients_train_as_without_faults(processes):
  plain, faulty = processes
  state = plain.initialize()
  datasets = [_client_data(5), _client_data(6)]
  want = plain.next(state, datasets, [(), ()])
  got = faulty.next(state, datasets, [(), ()], [_spec(None), _spec(None)])
  for g, w in zip(_flat(faulty.get_model_weights(got.state)),
                  _flat(plain.get_model_weights(want.state))):
    np.testing.assert_array_equal(g, w)


@pytest.mark.slow
def test_a_robust_aggregator_ignores_one_scaled_client_of_five():
  plain = _build(False, coordinate_median.CoordinateMedianFactory())
  faulty = _build(True, coordinate_median.CoordinateMedianFactory())
  state = plain.initialize()
  datasets = [_client_data(i) for i in range(5)]
  updates, _ = _honest_updates(plain, state, datasets)
  specs = [_spec('scale' if i == 0 else None) for i in range(5)]
  out = faulty.next(state, datasets, [()] * 5, specs)
  sent = [faults.corrupt(u, s) for u, s in zip(updates, specs)]
  before = _flat(plain.get_model_weights(state))
  for i, (b, a) in enumerate(zip(before, _flat(faulty.get_model_weights(out.state)))):
    np.testing.assert_allclose(b - a, np.median(np.stack([s[i] for s in sent]), axis=0),
                               rtol=1e-5, atol=1e-7)


def test_tffs_client_work_takes_client_data_not_datasets(processes):
  plain, _ = processes
  with pytest.raises(TypeError, match='ClientData'):
    plain.next(plain.initialize(), [_client_data(1).dataset()], [()])
