"""``fl.client_runtime: tf`` gives TFF's round: every method, both aggregators, stacked or not."""
import json
import os
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

import models
from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy.config import ConfigError
from tff_noisy.data import federated as federated_data
from tff_noisy.federated import client_data
from tff_noisy.federated import client_work
from tff_noisy.methods import recipe
from tff_noisy.methods.maskedoptim import parts as masked_optim
from tff_noisy.ops import faults as faults_lib
from tff_noisy.federated.client_parts import ClientPart, ClientProgram, CrossEntropy
from tff_noisy.runtime import tf_clients
from tff_noisy.simulation import assembly
from tff_noisy.simulation import driver
from tff_noisy.simulation import rounds
from tff_noisy.simulation.client_state import ClientStateStore
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

# Each method's parameters and the server's phase (hparams) the round runs in: FedEFC's
# clients after the switch to forward correction, MaskedOptim's flagged clients correcting,
# FedNoRo's distilling, FedCorr's pre-processing (its clients trained group after group).
METHODS = {
    'fedavg': ({}, {}), 'fedprox': ({'mu': 0.1}, {}),
    'fedln': ({'activation_round': 5}, {}), 'fedln_nafedavg': ({'activation_round': 5}, {}),
    'fedds': ({}, {}),
    'fedefc': ({}, {'corrected': 1}), 'forward_correction': ({}, {'corrected': 1}),
    'maskedoptim': ({'warmup_rounds': 1}, {}), 'lsc': ({}, {}),
    'fednoro': ({'warmup_rounds': 1}, {'kd_weight': 0.5}),
    'fedcorr': ({'t1': 1}, {'preprocessing': 1, 'beta': 5.0}),
}

STACKED = ('fedavg', 'fedprox', 'fedln', 'fedln_nafedavg', 'fedds', 'fedefc',
           'forward_correction')


def _fedavg():
  """FedAvg's client program: cross-entropy."""
  return ClientProgram([CrossEntropy()])

def _config(cache, runtime, method, aggregator='mean', **fl):
  return config_lib.from_dict({
      'seed': 0, 'data': {'dataset': 'digits', 'public_fraction': 0.1, 'cache_dir': str(cache)},
      'partition': {'name': 'iid', 'num_clients': 6},
      'noise': {'name': 'pairflip', 'rate': 0.6, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp', 'width': 32},
      'method': {'name': method, 'params': METHODS[method][0]},
      'fl': {'rounds': 12, 'participation': 0.5, 'local_epochs': 2, 'batch_size': 16,
             'client_lr': 0.05, 'momentum': 0.9, 'weight_decay': 1e-4,
             'aggregator': aggregator, 'client_runtime': runtime, **fl}})


def one_round(cache, runtime, method, aggregator='mean', stacks=(True,)):
  """``[(new global weights, client states, round metrics)]`` of one round from the same
  start (the method prepared, its phase set, clients 0-2 with a flagged noisy client),
  one per entry of ``stacks`` (the ``tf`` runtime stacking clients where it can, or not:
  one process, its client runtime rebuilt)."""
  config = _config(cache, runtime, method, aggregator)
  data = federated_data.build_federated_data(config)
  built = assembly.build_method(config, data)
  process = built.process
  store = ClientStateStore()
  server = recipe.ServerContext(process, built.setup, data, store)
  for step in built.recipe.server:
    step.prepare(server)
  tf.keras.utils.set_random_seed(0)
  state = assembly.initial_state(process, built.setup.model_fn())
  hparams = dict(process.get_hparams(state), **METHODS[method][1])
  state = process.set_hparams(state, hparams)
  ids = data.client_ids[:3]
  clients, _ = driver.client_datasets(built.recipe.data, data, store, ids, [11, 12, 13],
                                      config.fl.batch_size)
  states = [store.objective_state(cid, process.program, data.y[cid]) for cid in clients]
  if method in ('maskedoptim', 'fednoro'):  # Both flag a client by its state's 'noisy'.
    states[0][masked_optim.NOISY] = np.int32(1)
  outputs = []
  for stack in stacks:
    if not stack:
      setup = built.setup
      process.clients = tf_clients.InProcessClients(
          setup.model_fn, setup.client_optimizer, process.program,
          local_epochs=setup.local_epochs, weight_decay=setup.weight_decay,
          batch_size=setup.batch_size, stack=False)
    trained = rounds.train(built.recipe, process, 1, state, clients, states, None, server)
    new_state, metrics, new_states = trained.state, trained.metrics, trained.client_states
    if runtime == 'tf':  # Stacked exactly where the client parts allow it.
      described = process.clients.describe()
      assert (described['path'] == 'stacked') == (stack and method in STACKED), described
    weights = tf.nest.flatten(process.get_model_weights(new_state))
    outputs.append(([np.asarray(w) for w in weights], new_states, metrics))
  return outputs


def _assert_same_round(want, got, tolerance=1e-5):
  want_weights, want_states, want_metrics = want
  got_weights, got_states, got_metrics = got
  scale = max(np.abs(w).max() for w in want_weights)
  for w, g in zip(want_weights, got_weights):
    np.testing.assert_allclose(g, w, atol=tolerance * scale, rtol=0)
  for w, g in zip(tf.nest.flatten(want_states), tf.nest.flatten(got_states)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=tolerance * max(
        1.0, np.abs(np.asarray(w)).max()), rtol=0)
  assert got_metrics['train_loss'] == pytest.approx(want_metrics['train_loss'], rel=1e-5)
  assert got_metrics['non_finite_clients'] == want_metrics['non_finite_clients']
  assert got_metrics.get('objective', {}).keys() == want_metrics.get('objective', {}).keys()
  for name, value in want_metrics.get('objective', {}).items():
    assert got_metrics['objective'][name] == pytest.approx(value, rel=1e-5, abs=1e-6)


def test_one_round_equals_tff(tmp_path):
  """The fast tier's check; the slow tier runs every method with both aggregators."""
  (want,) = one_round(tmp_path, 'tff', 'fedprox')
  (got,) = one_round(tmp_path, 'tf', 'fedprox')
  _assert_same_round(want, got)


@pytest.mark.slow
@pytest.mark.parametrize('aggregator', ['mean', 'geometric_median'])
@pytest.mark.parametrize('method', sorted(METHODS))
def test_every_method_one_round_equals_tff(tmp_path, method, aggregator):
  """Within 1e-5 of the largest weight; LSC within 4e-5: the same kernel on both, but
  its contrastive term's exp(similarity / temperature) magnifies the rounding
  differences between TFF's statically linked TensorFlow and this process's (measured
  1.4e-5 on 19 of 2,048 weights; 1.6e-5 on 21 with oneDNN off; 2.6e-5 on 12 on a
  machine whose CPU has AMX, the same at 837e115, so the machine's kernels, not a
  change, set it)."""
  tolerance = 4e-5 if method == 'lsc' else 1e-5
  (want,) = one_round(tmp_path, 'tff', method, aggregator)
  for got in one_round(tmp_path, 'tf', method, aggregator, stacks=(True, False)):
    _assert_same_round(want, got, tolerance)


def test_results_say_where_and_how_clients_trained(tmp_path):
  config = _config(tmp_path / 'c', 'tf', 'fedavg', rounds=1)
  results = driver.run_experiment(config, str(tmp_path / 'run'), progress=False)
  saved = json.loads((tmp_path / 'run' / 'results.json').read_text())
  assert saved['runtime'] == results.runtime
  assert results.runtime['client_runtime'] == 'tf'
  assert results.runtime['clients_trained_on'] == 'CPU'  # conftest hides any GPU.
  assert results.runtime['path'] == 'stacked' and results.runtime['clients_per_call'] >= 1


@pytest.mark.slow
def test_pinned_digits_twelve_rounds_within_a_point(tmp_path):
  """The 12-round digits protocol: per-round test accuracy within 1 point of TFF's."""
  runs = {runtime: driver.run_experiment(_config(tmp_path / 'c', runtime, 'fedavg'),
                                         str(tmp_path / runtime), progress=False)
          for runtime in ('tff', 'tf')}
  for want, got in zip(runs['tff'].rounds, runs['tf'].rounds):
    assert got['clients'] == want['clients']
    assert abs(got['test_accuracy'] - want['test_accuracy']) <= 0.01


@pytest.mark.parametrize('name, hint', [('tf2', "did you mean 'tf'?"),
                                        ('tflit', "did you mean 'tflite'?")])
def test_unknown_runtime_suggests_the_closest(name, hint):
  with pytest.raises(ConfigError, match='^' + re.escape(
      f"fl.client_runtime: unknown client runtime '{name}'; {hint} Allowed: auto, tff, tf, "
      'tflite') + '$'):
    config_lib.from_dict({'fl': {'client_runtime': name}})


def _small_mlp():
  return models.build_model('mlp', (8, 8, 1), 10, width=16)


def _runtime_record(program=None, **options) -> dict:
  """The ``tf`` runtime's ``describe()`` on this (GPU-less) process, for a small MLP."""
  return tf_clients.InProcessClients(
      _small_mlp, tff.learning.optimizers.build_sgdm(0.1), program or _fedavg(),
      local_epochs=1, weight_decay=0.0, batch_size=16, **options).describe()


def test_cpu_stacks_clients_of_few_steps_and_trains_larger_ones_one_call_each():
  """fl.stack_clients: null on the CPU: the median client's steps a round decide."""
  most = tf_clients.CPU_MAX_STACKED_CLIENT_STEPS
  assert _runtime_record(median_client_steps=most)['path'] == 'stacked'
  assert _runtime_record(median_client_steps=None)['path'] == 'stacked'  # No client data.
  many = _runtime_record(median_client_steps=most + 1)
  assert many['path'] == 'one call per client'
  assert many['why_not_stacked'].startswith(f'on the CPU, clients of {most + 1} steps a round')
  assert _runtime_record(median_client_steps=most + 1, stack=True)['path'] == 'stacked'
  unstacked = _runtime_record(median_client_steps=1, stack=False)
  assert unstacked['why_not_stacked'] == 'fl.stack_clients: false'


def test_cpu_trains_convolutional_clients_one_call_each_unless_told_to_stack():
  cnn = models.build_model('pooled_cnn', (8, 8, 1), 10)
  reason = tf_clients.why_not_stacked(cnn, _fedavg(), None, 'CPU', 1)
  assert reason.startswith('on the CPU, stacked convolutions (')
  assert tf_clients.why_not_stacked(cnn, _fedavg(), True, 'CPU', 1) == ''
  assert tf_clients.why_not_stacked(cnn, _fedavg(), None, 'GPU:0', 1) == ''


def test_why_not_stacked_puts_exactness_first_and_stacks_on_a_gpu():
  class WithStart(ClientPart):  # Declares nothing: not stackable.

    def start(self, ctx):
      pass

  reason = _runtime_record(ClientProgram([CrossEntropy(), WithStart()]),
                           median_client_steps=1, stack=True)['why_not_stacked']
  assert reason == 'client part WithStart is not declared stackable (Needs.stackable)'
  assert tf_clients.why_not_stacked(_small_mlp(), _fedavg(), None, 'GPU:0', 10_000) == ''


def test_the_config_and_the_clients_reach_the_runtime(tmp_path, monkeypatch):
  config = _config(tmp_path, 'tf', 'fedavg', stack_clients=False)
  data = federated_data.build_federated_data(config)
  built = {}
  real_build = assembly.runtime.build

  def build(name, **options):
    built.update(options, name=name)
    return real_build(name, **options)

  monkeypatch.setattr(assembly.runtime, 'build', build)
  setup = assembly.build_method(config, data, validation.validate_experiment(config)).setup
  assert setup.probes_in_process and built['name'] == 'tf'
  assert setup.clients(_fedavg()).describe()['why_not_stacked'] == (
      'fl.stack_clients: false')
  assert built['median_client_steps'] == assembly.median_client_steps(data, 2, 16) > 0


def test_median_client_steps_counts_local_epochs_of_batches():
  data = types.SimpleNamespace(y={'a': np.zeros(10), 'b': np.zeros(33), 'c': np.zeros(64)})
  assert assembly.median_client_steps(data, 2, 16) == 2 * 3  # Median 33: 3 batches.
  assert assembly.median_client_steps(types.SimpleNamespace(), 2, 16) is None


def test_bad_clients_per_call_is_a_config_error():
  with pytest.raises(ConfigError, match='^fl.clients_per_call: must be >= 1'):
    config_lib.from_dict({'fl': {'clients_per_call': 0}})


def test_tf_runtime_with_workers_is_refused(tmp_path):
  with pytest.raises(ConfigError, match="^--workers: with fl.client_runtime: tf the clients "
                     "train in this process's TensorFlow"):
    driver.run_experiment(_config(tmp_path, 'tf', 'fedavg'), str(tmp_path / 'out'),
                          workers=['localhost:1'])
  assert not (tmp_path / 'out').exists()


def test_clients_train_on_the_gpu_when_there_is_one(tmp_path):
  """Runs where TensorFlow sees a GPU (a child process: conftest hides GPUs here)."""
  script = (
      'import sys, tensorflow as tf\n'
      'if not tf.config.list_physical_devices("GPU"): sys.exit(3)\n'
      'from tff_noisy import config as c\n'
      'from tff_noisy.simulation import driver\n'
      f'cfg = c.from_dict({{"data": {{"dataset": "digits", "cache_dir": {str(tmp_path)!r}}},'
      '"model": {"name": "mlp"}, "device": "gpu",'
      '"fl": {"rounds": 1, "client_runtime": "tf"}})\n'
      f'r = driver.run_experiment(cfg, {str(tmp_path / "run")!r}, progress=False)\n'
      'print(r.runtime["clients_trained_on"])\n')
  env = {k: v for k, v in os.environ.items() if k != 'CUDA_VISIBLE_DEVICES'}
  done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                        env=env, timeout=600, check=False)
  if done.returncode == 3:
    pytest.skip('TensorFlow sees no GPU on this machine')
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stdout.strip().splitlines()[-1].startswith('GPU')


@pytest.mark.slow
@pytest.mark.parametrize('behaviour', ['nan', 'scale'])
def test_faults_behave_as_on_tff(tmp_path, behaviour):
  """Dropouts and Byzantine clients: a nan client zeroed, weighted 0 and counted, a
  scaled one aggregated, as TFF's client work does it."""
  faults = {'faults': {'dropout': 0.25, 'byzantine': 0.5, 'behaviour': behaviour}}
  runs = {}
  for runtime in ('tff', 'tf'):
    config = _config(tmp_path / 'c', runtime, 'fedavg', rounds=1, participation=1.0)
    config = config_lib.from_dict(dict(config.to_dict(), **faults))
    runs[runtime] = driver.run_experiment(config, str(tmp_path / runtime), progress=False)
  want, got = runs['tff'].rounds[0], runs['tf'].rounds[0]
  assert got['byzantine_clients'] == want['byzantine_clients'] != []
  assert got['dropped_clients'] == want['dropped_clients']
  for key in ('non_finite_clients', 'aggregator', 'update_rejected'):
    assert got[key] == want[key]
  if behaviour == 'nan':
    assert got['non_finite_clients'] == len(got['byzantine_clients'])
  assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-5)
  assert got['test_accuracy'] == pytest.approx(want['test_accuracy'], abs=0.005)


@pytest.mark.slow
def test_kill_and_resume_equals_the_uninterrupted_run(tmp_path, killed_after_round):
  config = _config(tmp_path / 'c', 'tf', 'fedavg', rounds=6, checkpoint_every=2)
  reference = driver.run_experiment(config, str(tmp_path / 'ref'), progress=False)
  killed_after_round(4, lambda: driver.run_experiment(config, str(tmp_path / 'crashed'),
                                                      progress=False))
  resumed = driver.run_experiment(config, str(tmp_path / 'crashed'), resume=True,
                                  progress=False)
  keys = ('clients', 'train_loss', 'test_accuracy', 'test_macro_f1')
  assert [{k: r[k] for k in keys} for r in resumed.rounds] == [
      {k: r[k] for k in keys} for r in reference.rounds]
  assert [part['rounds'] for part in resumed.runtime_parts] == [[1, 4], [5, 6]]
  assert all(part['client_runtime'] == 'tf' for part in resumed.runtime_parts)
  assert reference.runtime_parts == [dict(rounds=[1, 6], **reference.runtime)]


def test_a_group_that_does_not_fit_is_halved_and_reported(monkeypatch):
  """Out of memory for 4 stacked clients: groups of 2, the same results, the record says so."""
  tf.keras.utils.set_random_seed(0)
  model_fn = lambda: models.build_model('mlp', (8, 8, 1), 10, width=16)  # pylint: disable=unnecessary-lambda-assignment

  def runtime(clients_per_call):
    return tf_clients.InProcessClients(
        model_fn, tff.learning.optimizers.build_sgdm(0.1), _fedavg(),
        local_epochs=1, weight_decay=0.0, batch_size=4, clients_per_call=clients_per_call)

  rng = np.random.default_rng(0)
  clients = [client_data.make_client_data(rng.random((n, 8, 8, 1)), rng.integers(0, 10, n),
                                          4, i) for i, n in enumerate([3, 9, 5, 7, 2])]
  weights = tf.nest.map_structure(lambda v: v.numpy(),
                                  client_work.model_weights_of(model_fn()))
  want, want_metrics, _, want_notes = runtime(8).train(weights, {}, clients, [()] * 5)
  assert want_notes == {}
  small = runtime(4)
  kernel = small._stacked_kernel  # pylint: disable=protected-access

  def out_of_memory_above_two(initial, hparams, batches, mask, *prologue):
    if mask.shape[0] > 2:
      raise tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating')
    return kernel(initial, hparams, batches, mask, *prologue)

  monkeypatch.setattr(small, '_stacked_kernel', out_of_memory_above_two)
  got, got_metrics, _, notes = small.train(weights, {}, clients, [()] * 5)
  assert notes['clients_per_call'] == 2 and 'halved to 2' in notes['clients_per_call_halved']
  assert small.describe()['clients_per_call'] == 2
  for w, g in zip(want, got):
    for a, b in zip(tf.nest.flatten(w.update), tf.nest.flatten(g.update)):
      np.testing.assert_allclose(b, a, atol=1e-6)
    assert float(g.update_weight) == float(w.update_weight)
  assert float(got_metrics['loss']) == pytest.approx(float(want_metrics['loss']), rel=1e-6)


@pytest.mark.parametrize('sizes,num_blocks', [([9, 3, 5, 7, 2], 1), ([6, 5, 7, 8, 5], 3)])
def test_stacked_updates_stay_stacked_in_client_order_with_faults_applied(sizes, num_blocks):
  """Groups of 2 clients sorted by steps: the kept rows are the clients' own updates in
  client order (the fault applied, a NaN row zeroed), as one call per client sends them;
  groups that hold the clients in order stay blocks of their own, the others are
  stitched into one."""
  tf.keras.utils.set_random_seed(0)
  model_fn = lambda: models.build_model('mlp', (8, 8, 1), 10, width=16)  # pylint: disable=unnecessary-lambda-assignment

  def runtime(stack):
    return tf_clients.InProcessClients(
        model_fn, tff.learning.optimizers.build_sgdm(0.1, momentum=0.9), _fedavg(),
        local_epochs=2, weight_decay=0.0, batch_size=4, clients_per_call=2, stack=stack)

  rng = np.random.default_rng(0)
  clients = [client_data.make_client_data(rng.random((n, 8, 8, 1)), rng.integers(0, 10, n),
                                          4, i) for i, n in enumerate(sizes)]
  faults = [faults_lib.fault_spec(behaviour, 100.0, 1.0, seed) for seed, behaviour in
            enumerate([None, 'scale', 'nan', None, 'gaussian'])]
  weights = tf.nest.map_structure(lambda v: v.numpy(),
                                  client_work.model_weights_of(model_fn()))
  got, _, _, _ = runtime(True).train(weights, {}, clients, [()] * 5, faults)
  want, _, _, _ = runtime(False).train(weights, {}, clients, [()] * 5, faults)
  assert want.stacked_blocks is None and len(got.stacked_blocks) == num_blocks
  rows = tf.nest.flatten(client_work.stacked_updates(got))
  for c, (w, g) in enumerate(zip(want, got)):
    for row, a, b in zip(rows, tf.nest.flatten(w.update), tf.nest.flatten(g.update)):
      np.testing.assert_array_equal(np.asarray(row[c]), b)
      np.testing.assert_allclose(b, a, atol=1e-5 * max(1.0, np.abs(a).max()))
    assert float(g.update_weight) == float(w.update_weight)
  assert float(got[2].update_weight) == 0 and not np.asarray(rows[0][2]).any()
  for kept, restacked in zip(rows, tf.nest.flatten(client_work.stacked_updates(list(got)))):
    np.testing.assert_array_equal(np.asarray(kept), restacked)
