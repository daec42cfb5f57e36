"""Exporting a finished run (a fake digits/mlp one); the keyword audio model."""

import errno
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from experiments import run as cli
import models
from tff_noisy import config as config_lib
from tff_noisy import files
from tff_noisy.data import federated
from tff_noisy.data import keywords
from tff_noisy.simulation import assembly
from tff_noisy.simulation import results as results_lib
from tflite_export import convert
from experiments import export_run as export_lib
from tflite_export import verify


def _write_results(run_dir, config):
  results_lib.write(run_dir, results_lib.Results(
      config=config.to_dict(), data_hash=config.data_hash(), method='fedavg',
      params={}, rounds=[], client_noise_rates={}))


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
  """What a finished digits/mlp run leaves, with weights of 5 Keras epochs."""
  root = tmp_path_factory.mktemp('export')
  config = config_lib.from_dict({
      'data': {'dataset': 'digits', 'cache_dir': str(root / 'cache')},
      'partition': {'num_clients': 3}, 'model': {'name': 'mlp'}})
  data = federated.build_federated_data(config)
  tf.keras.utils.set_random_seed(0)
  model = assembly.make_model_fn(config, data.input_shape, data.num_classes)()
  model.compile(tf.keras.optimizers.Adam(3e-3),
                tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  x = np.concatenate(list(data.x.values()))
  y = np.concatenate(list(data.y.values()))
  model.fit(x, y, batch_size=32, epochs=5, verbose=0)
  out = root / 'run'
  _write_results(str(out), config)
  results_lib.save_final_weights(str(out), model.get_weights())
  return out


def test_float_export_and_sidecar(run_dir):
  report = export_lib.export_run(str(run_dir))
  assert report['model'] == str(run_dir / 'model_none.tflite')
  assert os.path.getsize(report['model']) == report['bytes']
  sidecar = json.loads((run_dir / 'model_none.json').read_text())
  data_hash = results_lib.load(str(run_dir))['data_hash']
  assert report['config_hash'] == sidecar['config_hash'] == data_hash
  assert sidecar['class_names'] == [str(d) for d in range(10)]
  assert sidecar['input_shape'] == [8, 8, 1]
  assert sidecar['input_dtype'] == 'float32' and sidecar['quantize'] == 'none'
  assert '[0, 1]' in sidecar['preprocessing']
  assert sidecar['quantization_params']['inputs'][0]['dtype'] == 'float32'
  assert 'agreement' not in report


def test_int8_integer_io_verified(run_dir, tmp_path):
  path = tmp_path / 'sub' / 'm.tflite'
  report = export_lib.export_run(str(run_dir), 'int8', str(path),
                                 representative_size=50, integer_io=True,
                                 verify=True)
  assert report['n'] == 360
  assert report['keras_accuracy'] > 0.85  # The weights were loaded.
  assert report['agreement'] >= 0.95
  assert report['tflite_accuracy'] >= report['keras_accuracy'] - 0.03
  sidecar = json.loads((tmp_path / 'sub' / 'm.json').read_text())
  assert sidecar['model_file'] == 'm.tflite'
  assert sidecar['input_dtype'] == 'int8'
  (inputs,) = sidecar['quantization_params']['inputs']
  assert inputs['dtype'] == 'int8' and inputs['scale'] > 0


def test_not_a_finished_run(run_dir, tmp_path):
  with pytest.raises(FileNotFoundError,
                     match='results.json: not a finished tff-noisy run'):
    export_lib.export_run(str(tmp_path))
  config = results_lib.load(str(run_dir))['config']
  _write_results(str(tmp_path), config_lib.from_dict(config))
  with pytest.raises(FileNotFoundError,
                     match='final_weights.npz: the run did not finish'):
    export_lib.export_run(str(tmp_path))


@pytest.mark.parametrize('kwargs, match', [
    ({'quantize': 'int4'}, 'allowed: none, float16, dynamic, int8'),
    ({'quantize': 'int8', 'representative_size': 0},
     'representative_size >= 1'),
    ({'quantize': 'float16', 'integer_io': True}, 'needs quantize=int8'),
])
def test_bad_options_fail_before_any_work(tmp_path, kwargs, match):
  with pytest.raises(ValueError, match=match):
    export_lib.export_run(str(tmp_path), **kwargs)  # Not even a run.


def test_cli(run_dir, tmp_path, capsys):
  out = tmp_path / 'cli.tflite'
  cli.main(['export', str(run_dir), '--quantize', 'dynamic', '--out', str(out),
            '--verify'])
  printed = capsys.readouterr().out
  assert f'{out}: {os.path.getsize(out):,} bytes (dynamic)' in printed
  assert 'top-1 agreement with Keras' in printed
  assert (tmp_path / 'cli.json').exists()
  for argv in (['--quantize', 'int4'],
               ['--quantize', 'int8', '--representative-size', '0']):
    with pytest.raises(SystemExit) as exit_info:
      cli.main(['export', str(run_dir), *argv])
    assert exit_info.value.code == 2
  errors = capsys.readouterr().err
  assert 'allowed: none, float16' in errors
  assert 'representative_size >= 1' in errors
  with pytest.raises(SystemExit):
    cli.main(['export', str(tmp_path / 'absent')])
  assert 'not a finished tff-noisy run' in capsys.readouterr().err


@pytest.mark.skipif(shutil.which('espeak-ng') is None,
                    reason='espeak-ng not installed (apt-get install espeak-ng)')
@pytest.mark.slow
def test_audio_model_trained_on_keywords_converts_to_builtins():
  clips = keywords.synthesise(words=('yes', 'no'), voices=('en', 'en+f3'),
                              test_voices=('en+f3',), speeds=(140, 190),
                              pitches=(50,))
  tf.keras.utils.set_random_seed(0)
  model = models.build_model('audio', (16000,), 10)
  optimizer = tf.keras.optimizers.Adam(1e-3)
  loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  for _ in range(3):
    with tf.GradientTape() as tape:
      value = loss(clips['y_train'], model(clips['x_train'], training=True))
    gradients = tape.gradient(value, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
  x = np.concatenate([clips['x_train'], clips['x_test']])
  keras_logits = model(x, training=False).numpy()

  float_bytes = convert.convert_keras(model, 'none')
  assert not convert.has_flex_ops(float_bytes)
  np.testing.assert_allclose(verify.run_tflite(float_bytes, x, batch=4),
                             keras_logits,
                             atol=1e-4 * np.abs(keras_logits).max())

  int8_bytes = convert.convert_keras(model, 'int8', clips['x_train'])
  assert not convert.has_flex_ops(int8_bytes)
  details = tf.lite.Interpreter(model_content=int8_bytes).get_tensor_details()
  (log,) = [d for d in details if d['name'].endswith('/Log')]
  assert log['dtype'] == np.float32  # The front end stays float.
  assert any(d['dtype'] == np.int8 for d in details)
  top1 = np.argmax(verify.run_tflite(int8_bytes, x, batch=4), -1)
  assert np.mean(top1 == np.argmax(keras_logits, -1)) >= 0.75
  with pytest.raises(ValueError, match='front end stays float'):
    convert.convert_keras(model, 'int8', clips['x_train'], integer_io=True)


def test_evaluate_command_scores_the_final_model_per_class(run_dir, capsys):
  cli.main(['evaluate', str(run_dir)])
  saved = json.loads((run_dir / 'evaluation.json').read_text())
  run = assembly.load_finished_run(str(run_dir))
  predicted = np.argmax(run.model.predict(run.data.x_test, verbose=0), axis=1)
  assert saved['test_accuracy'] == np.mean(predicted == run.data.y_test)
  for c, accuracy in enumerate(saved['test_class_accuracy']):
    assert accuracy == np.mean(predicted[run.data.y_test == c] == c)
  assert saved['test_accuracy'] > 0.5  # Five epochs learn digits well above chance.
  assert f"test accuracy {saved['test_accuracy']:.4f}" in capsys.readouterr().out


def _one_error_line(capsys, argv) -> str:
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv)
  assert exit_info.value.code == 2
  return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_full_disk_leaves_no_part_of_a_file_and_says_so(run_dir, tmp_path, monkeypatch,
                                                           capsys):
  """``export`` and ``evaluate`` write whole files or none: on a full disk the earlier
  file (or none) is left, with one line saying the disk is full."""
  def full(fd):
    raise OSError(errno.ENOSPC, 'No space left on device')
  (tmp_path / 'm.tflite').write_bytes(b'earlier')
  monkeypatch.setattr(os, 'fsync', full)
  for argv, path in ((['export', str(run_dir), '--out', str(tmp_path / 'm.tflite')],
                      tmp_path / 'm.tflite'),
                     (['evaluate', str(run_dir)], run_dir / 'evaluation.json')):
    before = path.read_bytes() if path.exists() else None
    assert _one_error_line(capsys, argv) == (
        f'tff-noisy: error: cannot write {path}: No space left on device: the disk is full')
    assert (path.read_bytes() if path.exists() else None) == before
    assert not [name for name in os.listdir(path.parent) if name.startswith(f'.{path.name}')]
  assert not (tmp_path / 'm.json').exists()


def test_a_read_only_run_directory_is_one_line(run_dir, monkeypatch, capsys):
  def read_only(path, content):
    raise OSError(errno.EROFS, 'Read-only file system', path)
  monkeypatch.setattr(files, 'write_atomically', read_only)
  for argv, name in ((['export', str(run_dir)], 'model_none.tflite'),
                     (['evaluate', str(run_dir)], 'evaluation.json')):
    assert _one_error_line(capsys, argv) == (
        f'tff-noisy: error: cannot write {run_dir / name}: Read-only file system')
