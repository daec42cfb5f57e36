"""On-device training models (tflite_export/training.py): export, signatures, parity
with the TFF client work, forward correction on the device, bad input."""

import json
from typing import NamedTuple

import numpy as np
import pytest
import tensorflow as tf
from sklearn import datasets as sk_datasets

import models
from tff_noisy.config import ConfigError
from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_work
from tff_noisy.federated import process as process_lib
from tff_noisy.methods.fedefc import parts as forward_correction
from tff_noisy.methods.maskedoptim import parts as masked_optim
from tff_noisy.federated.client_parts import ClientContext, ClientProgram, CrossEntropy
from tff_noisy.federated.client_parts import Outputs, Proximal
from tff_noisy.ops import transition
from tff_noisy.simulation import assembly
from tff_noisy.simulation import driver
from tff_noisy.tff_runtime import import_tff
from tflite_export import device_client
from tflite_export import training

tff = import_tff()
_SHAPE = (8, 8, 1)


def _mlp(activation='tanh', width=16):
  """A small mlp like models/mlp.py, with a smooth activation for exact parity."""
  inputs = tf.keras.Input(shape=_SHAPE)
  x = tf.keras.layers.Flatten()(inputs)
  x = tf.keras.layers.Dense(width, activation=activation)(x)
  logits = tf.keras.layers.Dense(10, name='logits')(x)
  return tf.keras.Model(inputs, logits, name='mlp')


@pytest.fixture(scope='module')
def digits():
  d = sk_datasets.load_digits()
  x = (d.images / 16.0).astype(np.float32)[..., None]
  return x, d.target.astype(np.int64)


def _clients(digits, sizes=(40, 57, 23)):
  x, y = digits
  out, start = [], 0
  for n in sizes:
    out.append((x[start:start + n], y[start:start + n]))
    start += n
  return out


def _flat(weights):
  return list(weights.trainable) + list(weights.non_trainable)


def _convert(model_fn, objective, optimizer, **kwargs):
  tf.keras.utils.set_random_seed(0)
  model = model_fn()
  module = training.build_training_module(model, objective, optimizer, **kwargs)
  return training.convert_training_module(module), model


def _without_dropout(name, shape):
  """Zoo model ``name``'s builder with every dropout rate 0: TFLite's random stream is
  not TF's, so dropout models are compared without dropout on both sides."""

  def build():
    model = models.build_model(name, shape, 10)
    for layer in model.layers:
      if isinstance(layer, tf.keras.layers.Dropout):
        layer.rate = 0.0
    return model

  return build


def _check_round_trip(client):
  """``restore`` then ``parameters`` gives back exactly what was restored; returns it."""
  rng = np.random.default_rng(0)
  weights = [rng.normal(size=s).astype(np.float32) for s in client.weight_shapes]
  client.restore(weights)
  for got, want in zip(client.parameters(), weights):
    np.testing.assert_array_equal(got, want)
  return weights


class _Parity(NamedTuple):
  client: device_client.DeviceClient
  model: tf.keras.Model  # With the round's initial weights.
  errors: list  # Per client: |tflite - tff| / |tff| of the round's update.
  variable_errors: list  # Per client: that error of each variable (ModelWeights order).


def _parity(model_fn, clients, optimizer, objective=None, *, epochs=1, weight_decay=0.0,
            batch_size=16) -> _Parity:
  """One round of each ``(x, y)`` client in TFLite and in the TFF client work."""
  tflite_bytes, model = _convert(model_fn, objective, optimizer, local_epochs=epochs,
                                 weight_decay=weight_decay)
  client_data = [client_data_lib.make_client_data(x, y, batch_size, seed)
                 for seed, (x, y) in enumerate(clients)]
  datasets = [c.dataset() for c in client_data]
  process = process_lib.build_process(
      model_fn, datasets[0].element_spec, optimizer, program=objective,
      local_epochs=epochs, weight_decay=weight_decay)
  weights = tff.learning.models.ModelWeights(
      trainable=[v.numpy() for v in model.trainable_variables],
      non_trainable=[v.numpy() for v in model.non_trainable_variables])
  hparams = process.get_hparams(process.initialize())
  results, _, _ = process.train_clients(weights, hparams, client_data, [()] * len(datasets))
  client = device_client.DeviceClient(tflite_bytes)
  errors, variable_errors = [], []
  for dataset, result, (x, _) in zip(datasets, results, clients):
    upload = client.run_round(_flat(weights), dataset.repeat(epochs))
    reference = _flat(result.update)
    squared = [np.sum((a - b)**2) for a, b in zip(upload.update, reference)]
    norms = [np.sum(b**2) for b in reference]
    assert sum(norms) > 0
    errors.append(np.sqrt(sum(squared) / sum(norms)))
    variable_errors.append(np.sqrt(np.array(squared) / np.array(norms)))
    assert upload.update_weight == pytest.approx(float(result.update_weight))
    assert upload.update_weight == len(x) and upload.num_examples == epochs * len(x)
    assert not upload.non_finite
  return _Parity(client, model, errors, variable_errors)


def test_parity_tanh_sgdm_fedprox_weight_decay(digits):
  errors = _parity(lambda: _mlp('tanh'), _clients(digits),
                   tff.learning.optimizers.build_sgdm(0.1, 0.9),
                   ClientProgram([CrossEntropy(), Proximal(0.1)]), epochs=2, weight_decay=1e-3).errors
  print('tanh sgdm+prox+wd relative update errors', errors)
  assert max(errors) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize('name', ['label_smoothing', 'bi_tempered', 'sce', 'gce'])
def test_parity_of_the_robust_baseline_losses(digits, name):
  """The baselines' losses train on the device as in TFF's client work."""
  from tff_noisy import methods  # pylint: disable=g-import-not-at-top
  params = methods.resolve_params(name, {}, rounds=10)
  objective = ClientProgram(methods.METHODS[name].resolve()(params, None).parts)
  errors = _parity(lambda: _mlp('tanh'), _clients(digits),
                   tff.learning.optimizers.build_sgdm(0.1), objective).errors
  assert max(errors) < 1e-5, errors


@pytest.mark.slow
def test_parity_tanh_adam(digits):
  errors = _parity(lambda: _mlp('tanh'), _clients(digits),
                   tff.learning.optimizers.build_adam(1e-2)).errors
  print('tanh adam relative update errors', errors)
  assert max(errors) < 1e-5


@pytest.mark.slow
def test_mnist_cnn_round_trip_and_parity():
  """ReLU and max pools, dropout off: 1.8e-6 over a round of 4 steps (on_device.json)."""
  rng = np.random.default_rng(0)
  clients = [(rng.random((64, 28, 28, 1), np.float32), rng.integers(0, 10, 64))]
  parity = _parity(_without_dropout('mnist_cnn', (28, 28, 1)), clients,
                   tff.learning.optimizers.build_sgdm(0.05), batch_size=32)
  print('mnist_cnn relative update error', parity.errors)
  assert max(parity.errors) < 1e-4
  _check_round_trip(parity.client)


@pytest.mark.slow
def test_audio_round_trip_and_parity():
  """One ``train`` step of the audio model (in-model log-mel, dropout off) on noise.

  Measured (``python -m benchmarks.audio_parity``, results/audio_parity.json): the forward
  pass (RFFT front end included) and the dense head's update agree to ~1e-6; a step's
  whole update to 1e-6..4e-4 over four batches of 8 (5e-3 at 32): float32 rounding puts a
  few of the ~3.6M block-1 pre-ReLU values on the other side of 0 or changes a 2x2 max
  pool's winner, which moves the gradients of the conv blocks upstream of it.
  """
  rng = np.random.default_rng(0)
  x = (0.1 * rng.standard_normal((8, 16000))).astype(np.float32)
  parity = _parity(_without_dropout('audio', (16000,)), [(x, rng.integers(0, 10, 8))],
                   tff.learning.optimizers.build_sgdm(0.05), batch_size=8)
  (errors,) = parity.variable_errors
  print('audio relative update error', parity.errors, 'per variable', errors)
  assert max(parity.errors) < 5e-3
  np.testing.assert_array_less(errors[-2:], 1e-5)  # logits/kernel, logits/bias.
  client, model = parity.client, parity.model
  client.restore(model.get_weights())
  np.testing.assert_allclose(client.infer(x), model(x, training=False).numpy(), rtol=1e-4,
                             atol=1e-5)
  _check_round_trip(client)


def test_restore_parameters_round_trip_and_wrong_shapes(digits):
  tflite_bytes, model = _convert(_mlp, None, tff.learning.optimizers.build_sgdm(0.1))
  client = device_client.DeviceClient(tflite_bytes)
  assert client.weight_shapes == [tuple(v.shape) for v in model.trainable_variables]
  assert all(np.array_equal(a, b) for a, b in zip(client.parameters(), model.get_weights()))
  weights = _check_round_trip(client)
  x, y = digits
  np.testing.assert_allclose(client.infer(x[:5]), _keras_logits(model, weights, x[:5]),
                             rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match=r'weight w000 has shape \(3, 3\), the model\'s is '
                     r'\(64, 16\)'):
    client.restore([np.zeros((3, 3), np.float32)] + weights[1:])
  with pytest.raises(ValueError, match='has 4 weight tensors, got 3'):
    client.restore(weights[:3])
  for got, want in zip(client.parameters(), weights):  # Unchanged by the refusals.
    np.testing.assert_array_equal(got, want)


def _keras_logits(model, weights, x):
  for variable, value in zip(model.trainable_variables, weights):
    variable.assign(value)
  return model(x, training=False).numpy()


def test_forward_correction_on_device_equals_simulation(digits):
  objective = ClientProgram([forward_correction.ForwardCorrection(10)])
  tflite_bytes, model = _convert(_mlp, objective, tff.learning.optimizers.build_sgdm(0.1))
  client = device_client.DeviceClient(tflite_bytes)
  assert client.has_prologue
  x, y = digits
  x, y = x[:64], y[:64]
  dataset = driver.client_dataset(x, y, 16, 0)
  hparams = {'corrected': tf.constant(1)}
  logits, labels = client_work.inference_pass(lambda b: model(b, training=False), dataset)
  ctx = ClientContext(hparams, logits=logits, labels=labels)
  objective.start(ctx)
  context = ctx.values()
  client.restore(model.get_weights())
  prologue = client.prologue(x, y, {'corrected': 1})
  np.testing.assert_allclose(prologue['matrix'], context['matrix'], atol=1e-6)
  assert objective.device_metrics(prologue)['matrix_singular'] == float(
      context['matrix_singular'])
  assert float(prologue['matrix_clipped_columns']) == float(
      context['matrix_clipped_columns'])
  assert float(prologue['received_accuracy']) == pytest.approx(
      float(context['received_accuracy']))
  # One batch's loss before the step: the simulation's objective loss, and NumPy's.
  logits = model(x[:16], training=True)
  simulation = tf.reduce_mean(objective.loss(
      {'x': x[:16], 'y': y[:16]}, Outputs(logits), ctx)).numpy()
  numpy_loss = np.mean(transition.forward_corrected_cross_entropy(
      y[:16], logits.numpy(), context['matrix'].numpy()))
  device = float(client.train(x[:16], y[:16])['loss'])
  assert device == pytest.approx(float(simulation), rel=1e-6)
  assert device == pytest.approx(float(numpy_loss), rel=1e-5)
  # A matrix given directly (set_context) is the one the loss uses.
  client.restore(model.get_weights())
  matrix = np.full((10, 10), 0.02, np.float32) + np.eye(10, dtype=np.float32) * 0.8
  client.set_context(matrix=matrix, corrected=1)
  with pytest.raises(ValueError, match='set_context takes corrected, matrix, got matrix'):
    client.set_context(matrix=matrix)
  np.testing.assert_allclose(
      float(client.train(x[:16], y[:16])['loss']),
      np.mean(transition.forward_corrected_cross_entropy(y[:16], logits.numpy(), matrix)),
      rtol=1e-5)


def test_unsupported_client_parts_are_named():
  model = _mlp()
  objective = ClientProgram([masked_optim.MaskedOptimLoss(10)])
  with pytest.raises(ConfigError, match="cannot be exported for on-device training: "
                     "client part MaskedOptimLoss has no on-device form"):
    training.build_training_module(model, objective, tff.learning.optimizers.build_sgdm(1))


class _BuiltinsOnly:
  """A stand-in for tflite-runtime / LiteRT: TFLite's own error for a Flex op."""

  def __init__(self, model_content, num_threads=None):
    self._real = tf.lite.Interpreter(model_content=model_content, num_threads=num_threads)
    self._flex = training.needs_select_ops(model_content)

  def get_signature_list(self):
    return self._real.get_signature_list()

  def get_signature_runner(self, name):
    runner = self._real.get_signature_runner(name)
    if name != 'train' or not self._flex:
      return runner

    def fail(**kwargs):
      del kwargs
      raise RuntimeError(
          'Select TensorFlow op(s), included in the given model, is(are) not supported '
          'by this interpreter. Make sure you apply/link the Flex delegate before '
          'inference.')

    return fail


def test_small_cnn_needs_select_ops_and_says_which_runtime(digits):
  def small_cnn():
    return models.build_model('small_cnn', _SHAPE, 10)

  tflite_bytes, model = _convert(small_cnn, None, tff.learning.optimizers.build_sgdm(0.1))
  runtime = training.runtime_requirement(tflite_bytes)
  assert runtime['select_tf_ops'] and 'FlexConv2DBackpropFilter' in runtime['flex_ops']
  x, y = digits
  client = device_client.DeviceClient(tflite_bytes)  # The full TensorFlow interpreter.
  client.restore(model.get_weights())
  assert np.isfinite(float(client.train(x[:8], y[:8])['loss']))
  other = device_client.DeviceClient(tflite_bytes, interpreter_class=_BuiltinsOnly)
  np.testing.assert_allclose(other.infer(x[:2]), model(x[:2]).numpy(), atol=1e-5)
  with pytest.raises(device_client.RuntimeMissingSelectOps,
                     match="signature 'train'.*select-TF-ops.*tensorflow-lite-select-tf-ops"):
    other.train(x[:8], y[:8])


def _finished_run(root, model_name='mlp', method='fedavg', params=None):
  """What a finished digits run leaves (seeded initial weights as its final ones)."""
  from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
  from tff_noisy.data import federated  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import results as results_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.from_dict({
      'data': {'dataset': 'digits', 'cache_dir': str(root / 'cache')},
      'partition': {'num_clients': 3}, 'model': {'name': model_name},
      'method': {'name': method, 'params': params or {}},
      'fl': {'client_optimizer': 'sgd', 'momentum': 0.5, 'weight_decay': 1e-4,
             'local_epochs': 2}})
  data = federated.build_federated_data(config)
  tf.keras.utils.set_random_seed(1)
  model = assembly.make_model_fn(config, data.input_shape, data.num_classes)()
  out = root / 'run'
  results_lib.write(str(out), results_lib.Results(
      config=config.to_dict(), data_hash=config.data_hash(), method=method,
      params={}, rounds=[], client_noise_rates={}))
  results_lib.save_final_weights(str(out), model.get_weights())
  return out, config, model


def test_export_run_with_training_signatures_mlp(tmp_path, capsys):
  from experiments import run as cli  # pylint: disable=g-import-not-at-top
  run_dir, _, model = _finished_run(tmp_path)
  out = tmp_path / 'client.tflite'
  cli.main(['export', str(run_dir), '--on-device-training', '--out', str(out)])
  assert 'on-device training model' in capsys.readouterr().out
  sidecar = json.loads((tmp_path / 'client.json').read_text())
  assert sidecar['kind'] == 'on_device_training'
  assert set(training.SIGNATURES) <= set(sidecar['signatures'])
  assert sidecar['signatures']['train']['inputs'] == ['aggregation_weight', 'x', 'y']
  assert [w['shape'] for w in sidecar['weights']] == [
      list(v.shape) for v in model.trainable_variables]
  assert sidecar['client']['local_epochs'] == 2
  assert sidecar['client']['objective'] == {'parts': [{'name': 'CrossEntropy'}]}
  assert 'note' in sidecar['runtime'] and 'select_tf_ops' in sidecar['runtime']
  client = device_client.DeviceClient(out.read_bytes())
  for got, want in zip(client.parameters(), model.trainable_variables):
    np.testing.assert_array_equal(got, want.numpy())  # The run's final weights.


def test_export_config_small_cnn_fedprox_and_bad_input(tmp_path, capsys):
  from experiments import run as cli  # pylint: disable=g-import-not-at-top
  import yaml  # pylint: disable=g-import-not-at-top
  config_path = tmp_path / 'config.yaml'
  config_path.write_text(yaml.safe_dump({
      'seed': 3, 'data': {'dataset': 'digits', 'cache_dir': str(tmp_path / 'cache')},
      'partition': {'num_clients': 3}, 'model': {'name': 'small_cnn'},
      'method': {'name': 'fedprox', 'params': {'mu': 0.1}}}))
  from experiments import export_run  # pylint: disable=g-import-not-at-top
  report = export_run.export_on_device(str(config_path), str(tmp_path / 'cnn.tflite'))
  assert report['select_tf_ops'] and 'train' in report['signatures']
  sidecar = json.loads((tmp_path / 'cnn.json').read_text())
  assert sidecar['client']['objective']['parts'] == [{'name': 'CrossEntropy'},
                                                      {'name': 'Proximal', 'mu': 0.1}]
  assert 'select-TF-ops' in sidecar['runtime']['note']
  # Bad input: a run directory without final weights; options that are inference-only.
  empty = tmp_path / 'unfinished'
  empty.mkdir()
  with pytest.raises(SystemExit):
    cli.main(['export', str(empty), '--on-device-training'])
  assert 'not a finished tff-noisy run' in capsys.readouterr().err
  with pytest.raises(SystemExit):
    cli.main(['export', str(empty), '--on-device-training', '--quantize', 'int8'])
  assert '--quantize: not with --on-device-training' in capsys.readouterr().err
  config_path.write_text(yaml.safe_dump({
      'data': {'dataset': 'digits', 'cache_dir': str(tmp_path / 'cache')},
      'partition': {'num_clients': 3}, 'method': {'name': 'lsc'}}))
  with pytest.raises(SystemExit):
    cli.main(['export', str(config_path), '--on-device-training'])
  assert 'client part KSimilarity has no on-device form' in capsys.readouterr().err
