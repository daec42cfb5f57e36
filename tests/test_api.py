"""The public API (``tff_noisy``): its arguments checked at the edge, one line naming the
argument; its process equal to the run the command line makes of the same config."""
import json
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

import tff_noisy
from tff_noisy import methods
from tff_noisy import zoo
from tff_noisy.errors import ConfigError
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import run_dir


def _clients(num_clients=4, size=30, seed=0):
  rng = np.random.default_rng(seed)
  return {f'c{m}': (rng.normal(size=(size, 6)).astype(np.float32),
                    rng.integers(0, 3, size)) for m in range(num_clients)}


def _model_fn():
  inputs = tf.keras.Input((6,))
  hidden = tf.keras.layers.Dense(8, activation='relu')(inputs)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(3, name='logits')(hidden))


def _data(**options):
  rng = np.random.default_rng(1)
  test = (rng.normal(size=(20, 6)), rng.integers(0, 3, 20))
  return tff_noisy.federated_data(_clients(), test=test, num_classes=3, **options)


def test_importing_the_package_loads_no_tensorflow():
  code = ('import sys, tff_noisy; assert "tensorflow" not in sys.modules; '
          'tff_noisy.add_noise; assert "tensorflow" not in sys.modules; print("ok")')
  done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                        check=False)
  assert done.stdout.strip() == 'ok', done.stderr


def test_every_public_name_resolves():
  for name in tff_noisy.__all__:
    assert getattr(tff_noisy, name) is not None
  with pytest.raises(AttributeError, match='no attribute'):
    tff_noisy.not_a_name  # pylint: disable=pointless-statement


@pytest.mark.parametrize('clients, match', [
    ({}, 'clients: expected a non-empty mapping'),
    ([(np.zeros((2, 3)), np.zeros(2, int))], 'clients: expected a non-empty mapping'),
    ({'a': np.zeros((2, 3))}, r"clients\['a'\]: expected a pair"),
    ({'a': (np.zeros((2, 3)), np.zeros(3, int))}, r"clients\['a'\]: 2 inputs but 3 labels"),
    ({'a': (np.zeros((2, 3)), np.zeros(2))}, r"clients\['a'\] labels: expected a 1-D array of "
                                              'integer'),
    ({'a': (np.zeros((2, 3)), [0, 1]), 'b': (np.zeros((2, 4)), [0, 1])},
     r"clients\['b'\] inputs: shape \(4,\)"),
    ({3: (np.zeros((2, 3)), [0, 1])}, 'client ids must be non-empty strings'),
    ({'a': (np.array([[0.0, np.nan], [np.inf, 1.0]]), [0, 1])},
     r"clients\['a'\] inputs: 2 values are NaN or infinite"),
    ({'a': (np.array([['x', 'y']]), [0])}, r"clients\['a'\] inputs: expected numeric inputs"),
])
def test_federated_data_names_the_wrong_argument(clients, match):
  with pytest.raises((TypeError, ValueError), match=match):
    tff_noisy.federated_data(clients)


def test_federated_data_checks_labels_against_num_classes_and_truth():
  with pytest.raises(ValueError, match=r"clients\['c0'\] labels: labels must be in \[0, "
                                       r'num_classes=2\)'):
    tff_noisy.federated_data(_clients(), num_classes=2)
  with pytest.raises(ValueError, match='true_labels: expected a mapping with the same client'):
    tff_noisy.federated_data(_clients(), true_labels={'c0': [0]})
  with pytest.raises(ValueError, match='test: expected inputs'):
    tff_noisy.federated_data(_clients(), test=(np.zeros((3, 5)), [0, 1, 2]))


def test_federated_data_checks_the_public_sets_labels():
  public_x = np.zeros((4, 6))
  with pytest.raises(ValueError, match='public_y: labels of the public set need its inputs'):
    tff_noisy.federated_data(_clients(), public_y=[0, 1, 2, 0])
  with pytest.raises(ValueError, match='public_y: 3 labels for 4 public_x inputs'):
    tff_noisy.federated_data(_clients(), public_x=public_x, public_y=[0, 1, 2])
  with pytest.raises(ValueError, match=r'public_y: labels must be in \[0, num_classes=3\)'):
    tff_noisy.federated_data(_clients(), num_classes=3, public_x=public_x,
                             public_y=[0, 1, 2, 3])
  labelled = tff_noisy.federated_data(_clients(), public_x=public_x, public_y=[0, 1, 2, 0])
  unlabelled = tff_noisy.federated_data(_clients(), public_x=public_x)
  assert labelled.y_public.tolist() == [0, 1, 2, 0] and unlabelled.y_public is None
  assert labelled.config_hash != unlabelled.config_hash


@pytest.mark.parametrize('labels, num_classes, match', [
    ([0, -1, 2], None, r"clients\['a'\] labels: labels must be in \[0, 10,000\), got -1..2"),
    ([0, 10**12], None, r"clients\['a'\] labels: labels must be in \[0, 10,000\), got "
                        '0..1000000000000'),
    ([0, 1], 10**12, r'num_classes: expected an integer in \[2, 10,000\], got 1000000000000'),
    ([0, 1], 2.0, r'num_classes: expected an integer in \[2, 10,000\], got 2.0'),
])
def test_federated_data_refuses_negative_labels_and_too_many_classes(labels, num_classes,
                                                                     match):
  with pytest.raises(ValueError, match=match):
    tff_noisy.federated_data({'a': (np.zeros((len(labels), 2)), labels)},
                             num_classes=num_classes)


def test_federated_data_knows_the_truth_only_when_given():
  clients = _clients()
  unknown = tff_noisy.federated_data(clients)
  assert unknown.y_true is None and unknown.noise_rates is None
  assert unknown.num_classes == 3 and unknown.input_shape == (6,)
  flipped = {cid: ((y + 1) % 3 if cid == 'c1' else y) for cid, (_, y) in clients.items()}
  known = tff_noisy.federated_data({cid: (x, flipped[cid]) for cid, (x, _) in clients.items()},
                                   true_labels={cid: y for cid, (_, y) in clients.items()})
  np.testing.assert_array_equal(known.noise_rates, [0, 1, 0, 0])
  assert known.config_hash != unknown.config_hash  # The data's identity in checkpoints.


def test_federated_data_from_a_tff_client_data():
  tff = pytest.importorskip('tensorflow_federated')
  clients = _clients(num_clients=2, size=5)
  client_data = tff.simulation.datasets.TestClientData(
      {cid: {'pixels': x, 'label': y} for cid, (x, y) in clients.items()})
  data = tff_noisy.federated_data_from_client_data(client_data, x_key='pixels',
                                                   y_key='label', num_classes=3)
  assert sorted(data.client_ids) == sorted(clients)
  for cid, (x, y) in clients.items():
    np.testing.assert_allclose(data.x[cid], x)
    np.testing.assert_array_equal(data.y[cid], y)
  with pytest.raises(ValueError, match="need keys x_key='x'"):
    tff_noisy.federated_data_from_client_data(client_data)
  with pytest.raises(TypeError, match='client_data: expected a tff.simulation'):
    tff_noisy.federated_data_from_client_data(clients)


def test_add_noise_returns_what_it_flipped():
  labels = [np.arange(100) % 10 for _ in range(4)]
  noisy = tff_noisy.add_noise(labels, 10, {'name': 'symmetric', 'rate': 0.4,
                                           'noisy_fraction': 0.5}, seed=3)
  assert len(noisy.noisy_clients) == 2
  for m, (new, mask, matrix) in enumerate(zip(noisy.labels, noisy.flipped, noisy.matrices)):
    np.testing.assert_array_equal(mask, new != labels[m])
    assert (matrix is None) == (m not in noisy.noisy_clients)
    if matrix is None:
      assert not mask.any()
  assert 0 < np.mean(np.concatenate([noisy.flipped[m] for m in noisy.noisy_clients])) < 0.7
  again = tff_noisy.add_noise(labels, 10, tff_noisy.NoiseConfig('symmetric', rate=0.4,
                                                                noisy_fraction=0.5), seed=3)
  for a, b in zip(noisy.labels, again.labels):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('args, error, match', [
    (([[0, 1]], 10, {'name': 'symmetric', 'rate': 1.4}), ConfigError,
     r'noise.rate: must be in \[0, 1\], got 1.4'),
    (([[0, 1]], 10, tff_noisy.NoiseConfig('symmetric', rate=1.4)), ConfigError,
     r'noise.rate: must be in \[0, 1\], got 1.4'),
    (([[0, 1]], 10, {'name': 'symetric'}), ConfigError, 'noise.name'),
    (([[0, 1]], 10, {'name': 'real'}), ConfigError, "noise.name: real takes a dataset's own"),
    (([[0, 1]], 10, {'name': 'symmetric', 'rat': 0.1}), ConfigError, "did you mean 'rate'"),
    (([[0, 11]], 10, {'name': 'symmetric'}), ValueError, r'labels\[0\]: labels must be in'),
    ((np.zeros(3, int), 10, {'name': 'symmetric'}), TypeError, 'labels: expected a non-empty'),
    (([[0, 1]], 1, {'name': 'symmetric'}), ValueError,
     r'num_classes: expected an integer in \[2, 10,000\], got 1'),
    (([[0, 1]], 10**5, {'name': 'symmetric'}), ValueError,
     r'num_classes: expected an integer in \[2, 10,000\], got 100000'),
    (([[0, 1]], 10, 'symmetric'), TypeError, 'noise: expected a mapping or a NoiseConfig'),
])
def test_add_noise_names_the_wrong_argument(args, error, match):
  with pytest.raises(error, match=match):
    tff_noisy.add_noise(*args)


def test_build_refuses_wrong_arguments_before_tff_sees_them():
  data = _data()
  with pytest.raises(ConfigError, match="method.name: unknown method 'fedavgg'; did you mean "
                                        "'fedavg'"):
    tff_noisy.build('fedavgg', model_fn=_model_fn, data=data, rounds=2)
  with pytest.raises(TypeError, match="params: method 'fedefc' takes FedEFCParams"):
    tff_noisy.build('fedefc', model_fn=_model_fn, data=data, rounds=2,
                    params=methods.resolve_params('fedprox', {}, 2))
  with pytest.raises(ConfigError, match="unknown config key 'fl.client_lrr'"):
    tff_noisy.build('fedavg', model_fn=_model_fn, data=data, rounds=2, client_lrr=0.1)
  with pytest.raises(TypeError, match='data: expected tff_noisy.federated_data'):
    tff_noisy.build('fedavg', model_fn=_model_fn, data={'c0': (1, 2)}, rounds=2)
  with pytest.raises(TypeError, match='model_fn: expected a function'):
    tff_noisy.build('fedavg', model_fn=_model_fn(), data=data, rounds=2)
  with pytest.raises(ConfigError, match=r'model_fn: the model outputs \(None, 3\)|model_fn: '
                                        r'the model takes inputs of shape \(5,\)'):
    tff_noisy.build('fedavg', model_fn=lambda: tf.keras.Sequential(
        [tf.keras.Input((5,)), tf.keras.layers.Dense(3)]), data=data, rounds=2)
  with pytest.raises(ConfigError, match='data: method .fedds. needs a public set on the server'):
    tff_noisy.build('fedds', model_fn=_model_fn, data=data, rounds=2)


def _ending_in(head):
  def model_fn():
    inputs = tf.keras.Input((6,))
    return tf.keras.Model(inputs, head(tf.keras.layers.Dense(8, activation='relu')(inputs)))
  return model_fn


@pytest.mark.parametrize('head, layer, activation', [
    (tf.keras.layers.Dense(3, activation='softmax', name='probs'), 'probs', 'softmax'),
    (lambda h: tf.keras.layers.Activation('sigmoid', name='act')(tf.keras.layers.Dense(3)(h)),
     'act', 'sigmoid'),
    (lambda h: tf.keras.layers.Softmax(name='sm')(tf.keras.layers.Dense(3)(h)), 'sm', 'softmax'),
    (lambda h: tf.nn.softmax(tf.keras.layers.Dense(3)(h)), 'tf.nn.softmax', 'softmax'),
])
def test_a_model_that_outputs_probabilities_is_refused_naming_its_layer(head, layer,
                                                                        activation):
  with pytest.raises(ConfigError, match=f"model_fn: the model's output layer '{layer}' "
                                        f'applies {activation}, but the losses take logits'):
    tff_noisy.build('fedavg', model_fn=_ending_in(head), data=_data(), rounds=2)


def test_a_model_whose_last_layer_is_linear_is_accepted():
  from models import checked_model  # pylint: disable=import-outside-toplevel
  log_softmax = lambda h: tf.nn.log_softmax(tf.keras.layers.Dense(3)(h))  # Logits still.
  for head in (tf.keras.layers.Dense(3), log_softmax):
    assert checked_model(_ending_in(head)(), 'model_fn', (6,), 3) is not None


def test_a_method_that_reads_features_needs_a_logits_layer():
  def unnamed():
    inputs = tf.keras.Input((6,))
    return tf.keras.Model(inputs, tf.keras.layers.Dense(3)(tf.keras.layers.Dense(4)(inputs)))
  data = _data()
  with pytest.raises(ConfigError, match="model_fn: method 'lsc' reads the features"):
    tff_noisy.build('lsc', model_fn=unnamed, data=data, rounds=2,
                    params={'pca_components': 4})


def test_process_steps_check_their_arguments():
  process = tff_noisy.build('fedavg', model_fn=_model_fn, data=_data(), rounds=2,
                            client_runtime='tf')
  with pytest.raises(ValueError, match='call initialize'):
    process.next(tff_noisy.ProcessState(0, None, None, ()))
  state = process.initialize()
  with pytest.raises(TypeError, match='state: expected the ProcessState'):
    process.next(None)
  with pytest.raises(ValueError, match="client_ids: unknown client 'c9'"):
    process.next(state, ['c0', 'c9'])
  with pytest.raises(TypeError, match='client_ids: expected a list of client ids'):
    process.next(state, 'c0')
  with pytest.raises(ValueError, match='client_ids: expected distinct client ids'):
    process.next(state, ['c0', 'c0'])
  _, metrics = process.next(state, np.array(['c2', 'c0']))  # As an array of ids too.
  assert metrics['clients'] == ['c0', 'c2']
  state, metrics = process.next(state, ['c2', 'c0'])
  assert metrics['clients'] == ['c0', 'c2']
  state, _ = process.next(state)
  with pytest.raises(ValueError, match='round 2 is the last'):
    process.next(state)
  x, y = _data().x_test, _data().y_test
  with pytest.raises(ValueError, match=r'x, y: expected inputs \[n, '):
    process.evaluate(state, x[:, :2], y)
  with pytest.raises(ValueError, match=r'x, y: expected inputs .* got \(4, .*\) and 3'):
    process.evaluate(state, x[:4], y[:3])
  with pytest.raises(ValueError, match=r'y: labels must be in \[0, num_classes='):
    process.evaluate(state, x[:1], [99])
  assert 0 <= process.evaluate(state, x, y)['test_accuracy'] <= 1


@pytest.mark.parametrize('name', ['FEDAVG', 'FedProx', 'ｆｅｄａｖｇ'])
def test_a_method_name_in_another_case_or_full_width_gets_a_suggestion(name):
  with pytest.raises(ConfigError, match=f"unknown method '{name}'; did you mean "
                                        f"'{unicodedata.normalize('NFKC', name).lower()}'"):
    tff_noisy.load_config({'method': {'name': name}})


def test_a_config_names_a_registered_model(monkeypatch):
  monkeypatch.setattr(zoo, 'MODELS', zoo.MODELS.copy())  # Undo the registration.
  tff_noisy.register_model('tiny', lambda input_shape, num_classes: _model_fn())
  assert tff_noisy.load_config({'model': {'name': 'tiny'}}).model.name == 'tiny'
  with pytest.raises(ValueError, match="model 'tiny' is registered already"):
    tff_noisy.register_model('tiny', _model_fn)
  with pytest.raises(ValueError, match="options: a config sets only model.width and "
                                       "model.norm; got 'depth'"):
    tff_noisy.register_model('other', _model_fn, options={'depth': 2})
  with pytest.raises(ConfigError, match="model.name: unknown model 'tinyy'; did you mean "
                                        "'tiny'"):
    tff_noisy.load_config({'model': {'name': 'tinyy'}})


def test_load_config_refuses_a_config_that_names_other_data():
  with pytest.raises(ConfigError, match="data.dataset: 'mnist', but data= was given"):
    tff_noisy.load_config({'data': {'dataset': 'mnist'}}, data=_data())
  config = tff_noisy.load_config({'fl': {'rounds': 3}}, data=_data(), model_fn=_model_fn)
  assert (config.data.dataset, config.model.name, config.partition.num_clients) == (
      'custom', 'custom', 4)
  with pytest.raises(ConfigError, match='data.train_subset: not used with data.dataset: '
                                        'custom'):
    tff_noisy.run({'data': {'train_subset': 10}}, data=_data(), model_fn=_model_fn)
  with pytest.raises(TypeError, match='config: expected a YAML path, a mapping'):
    tff_noisy.run(['fl'], data=_data())


def test_clients_per_round_is_checked_against_the_clients_of_data(tmp_path):
  data = tff_noisy.federated_data(_clients(num_clients=20, size=3), num_classes=3)
  path = tmp_path / 'c.yaml'
  path.write_text('fl:\n  clients_per_round: 15\n')
  for config in ({'fl': {'clients_per_round': 15}}, str(path)):
    loaded = tff_noisy.load_config(config, data=data)
    assert (loaded.partition.num_clients, loaded.clients_per_round()) == (20, 15)
  with pytest.raises(ConfigError, match=r'fl.clients_per_round: must be in \[1, '
                                        r'partition.num_clients=20\], got 21'):
    tff_noisy.load_config({'fl': {'clients_per_round': 21}}, data=data)


def _accuracies(records):
  return [record['test_accuracy'] for record in records]


@pytest.mark.slow
def test_a_process_is_the_run_of_its_config_and_resumes_exactly(tmp_path):
  data = _data()
  process = tff_noisy.build('fedefc', model_fn=_model_fn, data=data, rounds=4, seed=3,
                            params={'t_mon': 1}, client_runtime='tf',
                            noise={'name': 'symmetric', 'rate': 0.5})
  start = process.initialize()
  state, records = start, []
  for _ in range(4):
    state, metrics = process.next(state)
    records.append(metrics)
  assert all('prestop' in record for record in records)  # The monitor runs inside next.

  results = tff_noisy.run(process.config, data=data, model_fn=_model_fn)
  assert _accuracies(results.rounds) == _accuracies(records)
  for got, want in zip(process.model_weights(state), results.final_weights):
    np.testing.assert_array_equal(got, want)
  assert results.client_noise_rates == pytest.approx(
      dict(zip(process.data.client_ids, process.data.noise_rates)))

  again, first = process.next(start)  # The state it was given is unchanged.
  assert first['test_accuracy'] == records[0]['test_accuracy']
  state = again
  state, _ = process.next(state)
  process.save(state, str(tmp_path / 'ckpt'))
  other = tff_noisy.build('fedefc', model_fn=_model_fn, data=data, rounds=4, seed=3,
                          params={'t_mon': 1}, client_runtime='tf',
                          noise={'name': 'symmetric', 'rate': 0.5})
  state = other.restore(str(tmp_path / 'ckpt'))
  assert state.round_num == 2
  tail = []
  for _ in range(2):
    state, metrics = other.next(state)
    tail.append(metrics)
  assert _accuracies(tail) == _accuracies(records[2:])


def _finished_run(out):
  """What a finished run leaves in ``out``, as far as its directory's claim looks."""
  out.mkdir(parents=True)
  for name in ('results.json', 'metrics.csv', 'final_weights.npz'):
    (out / name).write_text('earlier')
  (out / 'checkpoints' / 'round_00002').mkdir(parents=True)


def test_out_is_claimed_as_the_command_line_claims_it(tmp_path):
  """``run(out=)`` and ``compare(out=)`` keep every promise ``--out`` makes: a directory
  with files is refused unless resumed or overwritten, a live writer's lock is respected,
  and overwrite removes only a run's own outputs; all before any training."""
  config = {'fl': {'rounds': 1, 'client_runtime': 'tf'}}
  data = _data()
  finished = tmp_path / 'finished'
  _finished_run(finished)
  for call in (lambda **kw: tff_noisy.run(config, data=data, model_fn=_model_fn, **kw),
               lambda **kw: tff_noisy.compare(config, ['fedavg'], data=data,
                                              model_fn=_model_fn, **kw)):
    with pytest.raises(ValueError, match=r'out: .*finished is not empty \(checkpoints, '
                                         r'final_weights.npz, metrics.csv, \.\.\.\); '
                                         'continue that run with resume=True, replace it '
                                         'with overwrite=True'):
      call(out=str(finished))
    with run_dir.claim(str(finished), resume=True):  # A live writer.
      with pytest.raises(ValueError, match=r'out: .*finished is in use by PID'):
        call(out=str(finished), resume=True)
    (finished / 'notes.txt').write_text('mine')
    with pytest.raises(ValueError, match=r'overwrite=True: .*finished holds files tff-noisy '
                                         r'did not write \(notes.txt\)'):
      call(out=str(finished), overwrite=True)
    (finished / 'notes.txt').unlink()
    with pytest.raises(ValueError, match='resume, overwrite: give one of them'):
      call(out=str(finished), resume=True, overwrite=True)
    with pytest.raises(ValueError, match='overwrite: needs out'):
      call(overwrite=True)
    assert (finished / 'results.json').read_text() == 'earlier'
  (tmp_path / 'file').write_text('x')
  with pytest.raises(ValueError, match='out: .*file is a file, not a directory'):
    tff_noisy.run(config, data=data, model_fn=_model_fn, out=str(tmp_path / 'file'))


@pytest.mark.slow
def test_a_run_in_out_is_resumed_or_overwritten_as_on_the_command_line(tmp_path):
  config = {'fl': {'rounds': 2, 'client_runtime': 'tf'}}
  data, out = _data(), tmp_path / 'run'
  first = tff_noisy.run(config, data=data, model_fn=_model_fn, out=str(out))
  assert not (out / run_dir.LOCK_FILE).exists()  # Released.
  with pytest.raises(ValueError, match='is not empty'):
    tff_noisy.run(config, data=data, model_fn=_model_fn, out=str(out))
  again = tff_noisy.run(config, data=data, model_fn=_model_fn, out=str(out), resume=True)
  assert _accuracies(again.rounds) == _accuracies(first.rounds)
  replaced = tff_noisy.run({**config, 'seed': 1}, data=data, model_fn=_model_fn,
                           out=str(out), overwrite=True)
  assert results_lib.load(str(out))['config']['seed'] == 1
  assert replaced.rounds[-1]['round'] == 2


def test_a_run_on_data_given_in_python_exports_to_tflite(tmp_path):
  """``tff_noisy.export``: the final model of a run on the user's data and model, from its
  ``Results`` or its ``out=`` directory, as TFLite with its sidecar, quantised and
  verified against the Keras model; the data is checked to be the run's."""
  config = {'fl': {'rounds': 2, 'client_runtime': 'tf'},
            'noise': {'name': 'symmetric', 'rate': 0.4}}
  data = _data()
  results = tff_noisy.run(config, data=data, model_fn=_model_fn, out=str(tmp_path / 'run'))
  model = _model_fn()
  model.set_weights(results.final_weights)
  keras_accuracy = np.mean(np.argmax(model(data.x_test), -1) == data.y_test)
  report = tff_noisy.export(results, str(tmp_path / 'm.tflite'), data=data,
                            model_fn=_model_fn, verify=True)
  assert report['model'] == str(tmp_path / 'm.tflite')
  assert os.path.getsize(tmp_path / 'm.tflite') == report['bytes']
  assert report['keras_accuracy'] == keras_accuracy and report['agreement'] == 1.0
  assert report['n'] == len(data.y_test) and report['config_hash'] == results.data_hash
  sidecar = json.loads((tmp_path / 'm.json').read_text())
  assert sidecar['config_hash'] == results.data_hash and sidecar['input_shape'] == [6]
  assert sidecar['class_names'] == ['0', '1', '2'] and sidecar['quantize'] == 'none'
  assert sidecar['preprocessing'].startswith('float32 inputs of shape (6,) per example')
  int8 = tff_noisy.export(str(tmp_path / 'run'), tmp_path / 'q' / 'm8.tflite', data=data,
                          model_fn=_model_fn, quantize='int8', representative_size=20,
                          integer_io=True, verify=True)
  assert int8['quantize'] == 'int8' and int8['agreement'] >= 0.8
  assert json.loads((tmp_path / 'q' / 'm8.json').read_text())['input_dtype'] == 'int8'
  with pytest.raises(ValueError, match=r'data: this run trained on data given in Python '
                                       r'\(data.dataset custom\); pass the same data='):
    tff_noisy.export(results, str(tmp_path / 'x.tflite'), model_fn=_model_fn)
  with pytest.raises(ValueError, match=r'model_fn: this run trained on a model given in '
                                       r'Python \(model.name custom\)'):
    tff_noisy.export(results, str(tmp_path / 'x.tflite'), data=data)
  other = tff_noisy.federated_data(_clients(seed=5), test=(data.x_test, data.y_test))
  with pytest.raises(ValueError, match='data: not the data this run trained on'):
    tff_noisy.export(results, str(tmp_path / 'x.tflite'), data=other, model_fn=_model_fn)
  with pytest.raises(ValueError, match='allowed: none, float16, dynamic, int8'):
    tff_noisy.export(results, str(tmp_path / 'x.tflite'), data=data, model_fn=_model_fn,
                     quantize='int4')
  with pytest.raises(TypeError, match='results: expected the Results'):
    tff_noisy.export(results.to_dict(), str(tmp_path / 'x.tflite'))
  assert not (tmp_path / 'x.tflite').exists()


def test_the_api_runs_in_a_thread_other_than_the_one_that_imported_tff():
  """TFF's execution context is thread-local: without sharing it, every other thread got
  TFF's 'No default context installed'."""
  import threading  # pylint: disable=import-outside-toplevel
  from tff_noisy import tff_runtime  # pylint: disable=import-outside-toplevel
  tff_runtime.import_tff()  # Here, in the main thread.
  config = {'fl': {'rounds': 1, 'client_runtime': 'tff'}}
  done = {}

  def work():
    try:
      done['run'] = tff_noisy.run(config, data=_data(), model_fn=_model_fn).rounds
      process = tff_noisy.build('fedavg', model_fn=_model_fn, data=_data(), rounds=1,
                                client_runtime='tff')
      done['next'] = process.next(process.initialize()).metrics
    except Exception as e:  # pylint: disable=broad-except
      done['error'] = e

  thread = threading.Thread(target=work)
  thread.start()
  thread.join()
  assert 'error' not in done, done.get('error')
  assert len(done['run']) == 1 and done['next']['round'] == 1
