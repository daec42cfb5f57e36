"""Aggregator factories: type signatures first, then numbers against their NumPy twins."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.federated import aggregators
from tff_noisy.ops import geometric_median as gm
from tff_noisy.ops import robust
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

NUM_CLIENTS = 10
SHAPES = ([3, 4], [4])  # One trainable and one non-trainable tensor.
VALUE_TYPE = tff.types.to_type(tff.learning.models.ModelWeights(
    trainable=[tff.TensorType(np.float32, SHAPES[0])],
    non_trainable=[tff.TensorType(np.float32, SHAPES[1])]))
WEIGHT_TYPE = tff.TensorType(np.float32)

# Two Weiszfeld steps: TFF compiles every unrolled step (about 1 s each), and compiling is
# most of the time. The robustness check needs the default 10 and is marked slow.
PARAMS = {
    'mean': {},
    'geometric_median': {'max_iter': 2},
    'geometric_median_per_tensor': {'max_iter': 2},
    'coordinate_median': {},
    'trimmed_mean': {'beta': 0.3},
    'krum': {'f': 3},
    'multi_krum': {'f': 3, 'm': 2},
}
ROBUST = [name for name in PARAMS if name != 'mean']
COUNTS = ['excluded_clients', 'included_clients']
MEASUREMENTS = {
    'mean': ['mean_value', 'mean_weight'] + COUNTS,
    'geometric_median': COUNTS + ['iterations', 'objective'],
    'geometric_median_per_tensor': COUNTS + ['iterations', 'objective'],
    'coordinate_median': COUNTS,
    'trimmed_mean': COUNTS + ['trimmed_per_end'],
    'krum': COUNTS + ['selected', 'neighbours'],
    'multi_krum': COUNTS + ['selected', 'neighbours'],
}


@pytest.fixture(scope='module')
def process():
  """process(name, defaults=False): the aggregation process, built once per module."""
  cache = {}

  def get(name, defaults=False):
    if (name, defaults) not in cache:
      params = aggregators.resolve_params(name, {} if defaults else PARAMS[name], NUM_CLIENTS)
      cache[name, defaults] = aggregators.build_factory(name, params).create(
          VALUE_TYPE, WEIGHT_TYPE)
    return cache[name, defaults]

  return get


def _weights_of(flat):
  """A [16] vector as ModelWeights of SHAPES (the order tf.nest.flatten gives)."""
  return tff.learning.models.ModelWeights(
      trainable=[flat[:12].reshape(SHAPES[0]).astype(np.float32)],
      non_trainable=[flat[12:].astype(np.float32)])


def _flat(weights):
  return np.concatenate([t.ravel() for t in weights.trainable + weights.non_trainable])


def _run(process, points, weights):
  output = process.next(process.initialize(), [_weights_of(p) for p in points],
                        [np.float32(w) for w in weights])
  return _flat(output.result), output.measurements


@pytest.mark.parametrize('name', list(PARAMS))
def test_type_signature(process, name):
  p = process(name)
  assert isinstance(aggregators.build_factory(name, aggregators.resolve_params(
      name, {}, NUM_CLIENTS)), tff.aggregators.WeightedAggregationFactory)
  assert p.initialize.type_signature.result.placement == tff.SERVER
  value, weight = p.next.type_signature.parameter[1:]
  assert value == tff.FederatedType(VALUE_TYPE, tff.CLIENTS)
  assert weight == tff.FederatedType(WEIGHT_TYPE, tff.CLIENTS)
  result = p.next.type_signature.result
  assert result.result == tff.FederatedType(VALUE_TYPE, tff.SERVER)
  assert result.measurements.placement == tff.SERVER
  assert tff.structure.name_list(result.measurements.member) == MEASUREMENTS[name]
  for key in COUNTS:
    assert result.measurements.member[key] == tff.TensorType(np.int32)
  if name.startswith('geometric_median'):
    shape = [2] if name.endswith('per_tensor') else []
    assert result.measurements.member['iterations'] == tff.TensorType(np.int32, shape)
    assert result.measurements.member['objective'] == tff.TensorType(np.float32, shape)


def _twin(name, points, weights):
  """(aggregate, {measurement: expected}) from the NumPy twins, points [J, 16]."""
  params = aggregators.resolve_params(name, PARAMS[name], NUM_CLIENTS)
  if name == 'geometric_median':
    result = gm.weiszfeld(points, weights, **params)
    return result.median, {'iterations': result.iterations, 'objective': result.objective}
  if name == 'geometric_median_per_tensor':
    result = gm.weiszfeld_per_tensor([[p[:12], p[12:]] for p in points], weights, **params)
    return np.concatenate(result.median), {'iterations': result.iterations,
                                           'objective': result.objective}
  if name == 'coordinate_median':
    return robust.coordinate_median(points, weights), {}
  if name == 'trimmed_mean':
    return robust.trimmed_mean(points, params['beta'], weights), {
        'trimmed_per_end': robust.num_trimmed(int(np.sum(weights > 0)), params['beta'])}
  result = robust.krum(points, params['f'], params.get('m', 1), weights)
  return result.aggregate, {'selected': np.isin(np.arange(len(points)), result.selected)}


@pytest.mark.parametrize('name', ROBUST)
def test_equals_numpy_twin_and_excludes_non_finite_clients(process, name):
  rng = np.random.default_rng(0)
  points = (rng.normal(size=(NUM_CLIENTS, 16)) * rng.lognormal(0, 1, (NUM_CLIENTS, 1)))
  weights = rng.uniform(1, 5, NUM_CLIENTS)
  weights[4] = 0  # A client the client work zeroed.
  points[4] = 0
  got, measurements = _run(process(name), points, weights)
  expected, twin_measurements = _twin(name, points.astype(np.float32), weights)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  for key, value in twin_measurements.items():
    np.testing.assert_allclose(measurements[key], value, rtol=1e-5)
  assert (measurements['excluded_clients'], measurements['included_clients']) == (1, 9)
  # NaN and Inf clients take no part, whatever their weight.
  points[1, 3], points[6, 0] = np.nan, -np.inf
  weights[1] = 0
  noisy, measurements = _run(process(name), points, weights)
  mask = np.isfinite(points).all(axis=1) & (weights > 0)
  np.testing.assert_allclose(noisy, _twin(name, np.where(mask[:, None], points, 0).astype(
      np.float32), np.where(mask, weights, 0))[0], rtol=1e-5, atol=1e-6)
  assert (measurements['excluded_clients'], measurements['included_clients']) == (3, 7)


@pytest.mark.parametrize('name', ROBUST)
def test_every_client_excluded_gives_zeros(process, name):
  points = np.random.default_rng(1).normal(size=(NUM_CLIENTS, 16))
  points[0] = np.nan
  got, measurements = _run(process(name), points, np.zeros(NUM_CLIENTS))
  np.testing.assert_array_equal(got, np.zeros(16))
  assert (measurements['excluded_clients'], measurements['included_clients']) == (10, 0)


def test_mean_is_mean_factory_exactly(process):
  rng = np.random.default_rng(2)
  points = rng.normal(size=(NUM_CLIENTS, 16)).astype(np.float32)
  weights = rng.uniform(1, 100, NUM_CLIENTS).astype(np.float32)
  weights[[2, 7]] = 0
  points[[2, 7]] = 0  # As the client work sends a non-finite update.
  reference = tff.aggregators.MeanFactory().create(VALUE_TYPE, WEIGHT_TYPE)
  expected = reference.next(reference.initialize(), [_weights_of(p) for p in points],
                            list(weights))
  got, measurements = _run(process('mean'), points, weights)
  np.testing.assert_array_equal(got, _flat(expected.result))
  assert (measurements['excluded_clients'], measurements['included_clients']) == (2, 8)
  assert measurements['mean_value'] == expected.measurements['mean_value']
  # With every client excluded MeanFactory divides 0 by 0; the finalizer refuses that.
  got, measurements = _run(process('mean'), points, np.zeros(NUM_CLIENTS))
  assert np.isnan(got).all() and measurements['excluded_clients'] == NUM_CLIENTS


def _attacked(attack):
  """10 clients: a common vector plus small noise; clients 2, 5, 8 attacked.

  Weiszfeld starts at the weighted mean, which 100x-scaled updates drag far away; its 10
  default steps bring it back into the honest cluster for this draw, not for every one
  (some need 15).
  """
  rng = np.random.default_rng(1)
  honest = rng.normal(size=16) + 0.02 * rng.normal(size=(NUM_CLIENTS, 16))
  points = honest.copy()
  bad = [2, 5, 8]
  points[bad] = 100 * points[bad] if attack == 'scaled' else -points[bad]
  return points, rng.uniform(1, 3, NUM_CLIENTS), np.delete(honest, bad, axis=0).mean(axis=0)


@pytest.mark.parametrize('attack', ['scaled', 'sign_flipped'])
@pytest.mark.parametrize('name', [
    pytest.param(name, marks=pytest.mark.slow) if name.startswith('geometric_median') else name
    for name in PARAMS])
def test_three_of_ten_attacked(process, name, attack):
  """As tests/ops/test_robust.py; Weiszfeld with its default 10 steps."""
  points, weights, honest_mean = _attacked(attack)
  got, _ = _run(process(name, defaults=name.startswith('geometric_median')), points, weights)
  error = np.linalg.norm(got - honest_mean) / np.linalg.norm(honest_mean)
  if name == 'mean':
    assert error > 0.1
  else:
    assert error < 0.1


IN_PROCESS = ['mean', 'coordinate_median', 'trimmed_mean', 'krum', 'multi_krum']


def test_which_aggregators_run_in_process():
  """The stateless rules have an in-process form; the geometric medians run in TFF."""
  have = [name for name in PARAMS if hasattr(aggregators.build_factory(
      name, aggregators.resolve_params(name, PARAMS[name], NUM_CLIENTS)), 'in_process')]
  assert have == IN_PROCESS


@pytest.mark.parametrize('name', IN_PROCESS)
def test_in_process_equals_the_federated_process(process, name):
  """The same result and measurements from updates stacked in this process, with a
  weight-0 client, a NaN client (sent as the client work would not: the rule's own
  exclusion must catch it) and an Inf client."""
  rng = np.random.default_rng(2)
  points = rng.normal(size=(NUM_CLIENTS, 16)) * rng.lognormal(0, 1, (NUM_CLIENTS, 1))
  weights = rng.uniform(1, 5, NUM_CLIENTS)
  weights[4], points[4] = 0, 0
  if name != 'mean':  # The mean relies on the client work zeroing non-finite updates.
    points[1, 3], points[6, 0] = np.nan, -np.inf
  want, want_measurements = _run(process(name), points, weights)
  aggregate = aggregators.build_factory(name, aggregators.resolve_params(
      name, PARAMS[name], NUM_CLIENTS)).in_process()
  stacked = tff.learning.models.ModelWeights(
      trainable=[points[:, :12].reshape(NUM_CLIENTS, *SHAPES[0]).astype(np.float32)],
      non_trainable=[points[:, 12:].astype(np.float32)])
  in_blocks = [tf.nest.map_structure(lambda t, a=a, b=b: t[a:b], stacked)
               for a, b in [(0, 3), (3, 4), (4, NUM_CLIENTS)]]
  for blocks in [stacked], in_blocks:  # Row blocks in client order, as the runtimes keep them.
    got, measurements = aggregate(blocks, weights.astype(np.float32))
    np.testing.assert_allclose(_flat(_as_numpy(got)), want, rtol=1e-6, atol=1e-7)
    assert list(measurements) == MEASUREMENTS[name]
    for key in MEASUREMENTS[name]:
      np.testing.assert_array_equal(np.asarray(measurements[key]),
                                    np.asarray(want_measurements[key]))


def _as_numpy(weights):
  return tff.learning.models.ModelWeights(
      trainable=[np.asarray(t) for t in weights.trainable],
      non_trainable=[np.asarray(t) for t in weights.non_trainable])
