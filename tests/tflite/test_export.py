"""TFLite export: quantised parity on trained digits, audio, sidecar."""

import json

import numpy as np
import pytest
import tensorflow as tf
from sklearn import datasets

import models
from tflite_export import convert
from tflite_export import sidecar
from tflite_export import verify

# Minimum top-1 agreement with Keras on the held-out digits.
_AGREEMENT = {'none': 0.995, 'float16': 0.995, 'dynamic': 0.995, 'int8': 0.97}


@pytest.fixture(scope='module')
def digits():
  """small_cnn trained for 328 steps (8 epochs of 1,297 digits, 8x8, /16)."""
  data = datasets.load_digits()
  x = (data.images / 16.0).astype(np.float32)[..., np.newaxis]
  order = np.random.default_rng(0).permutation(len(x))
  x, y = x[order], data.target[order]
  tf.keras.utils.set_random_seed(0)
  model = models.build_model('small_cnn', (8, 8, 1), 10)
  model.compile(
      tf.keras.optimizers.Adam(1e-3),
      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  model.fit(x[:1297], y[:1297], batch_size=32, epochs=8, verbose=0)
  return model, x[:1297], x[1297:], y[1297:]


@pytest.fixture(scope='module')
def exported(digits):
  model, x_train, _, _ = digits
  return {q: convert.convert_keras(model, q, representative_data=x_train)
          for q in convert.QUANTIZATIONS}


@pytest.mark.parametrize('quantize', convert.QUANTIZATIONS)
def test_parity_on_digits(digits, exported, quantize):
  model, _, x_test, y_test = digits
  tflite_bytes = exported[quantize]
  assert not convert.has_flex_ops(tflite_bytes)
  result = verify.verify(model, tflite_bytes, x_test, y_test)
  assert result['n'] == 500
  assert result['keras_accuracy'] >= 0.95  # The model learned the task.
  assert result['agreement'] >= _AGREEMENT[quantize]
  assert result['tflite_accuracy'] >= result['keras_accuracy'] - 0.01


def test_quantised_sizes(exported):
  size = {q: len(b) for q, b in exported.items()}
  assert size['float16'] < 0.55 * size['none']
  assert size['dynamic'] < 0.3 * size['none']
  assert size['int8'] < 0.3 * size['none']


def test_int8_integer_io(digits):
  model, x_train, x_test, y_test = digits
  tflite_bytes = convert.convert_keras(model, 'int8', x_train,
                                       representative_size=100,
                                       integer_io=True)
  params = sidecar.quantization_params(tflite_bytes)
  assert params['inputs'][0]['dtype'] == 'int8'
  assert params['outputs'][0]['dtype'] == 'int8'
  assert params['inputs'][0]['scale'] > 0
  result = verify.verify(model, tflite_bytes, x_test, y_test)
  assert result['agreement'] >= _AGREEMENT['int8']


def test_run_tflite_batches_match_single_examples(exported):
  x = np.random.default_rng(0).random((5, 8, 8, 1), np.float32)
  np.testing.assert_allclose(verify.run_tflite(exported['none'], x, batch=2),
                             verify.run_tflite(exported['none'], x, batch=1),
                             atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize('name, options', [('resnet18', {}), ('resnet18', {'norm': 'group'}),
                                           ('resnet34', {}), ('vgg9', {})])
def test_paper_models_convert_to_builtins_and_match_keras(name, options):
  tf.keras.utils.set_random_seed(0)
  model = models.build_model(name, (32, 32, 3), 10, **options)
  tflite_bytes = convert.convert_keras(model, 'none')
  assert not convert.has_flex_ops(tflite_bytes)
  x = np.random.default_rng(0).random((4, 32, 32, 3), np.float32)
  keras_logits = model(x, training=False).numpy()
  np.testing.assert_allclose(verify.run_tflite(tflite_bytes, x, batch=2), keras_logits,
                             atol=1e-4 * np.abs(keras_logits).max())


def test_audio_converts_to_builtins_and_matches_keras():
  tf.keras.utils.set_random_seed(0)
  model = models.build_model('audio', (16000,), 12)
  tflite_bytes = convert.convert_keras(model, 'none')
  assert not convert.has_flex_ops(tflite_bytes)
  assert 'RFFT2D' in convert.op_names(tflite_bytes)
  t = np.arange(16000) / 16000
  rng = np.random.default_rng(0)
  x = np.stack([np.sin(2 * np.pi * f * t) + 0.1 * rng.standard_normal(16000)
                for f in (300, 1000, 4000)]).astype(np.float32)
  keras_logits = model(x, training=False).numpy()
  np.testing.assert_allclose(verify.run_tflite(tflite_bytes, x, batch=2),
                             keras_logits,
                             atol=1e-4 * np.abs(keras_logits).max())


@pytest.mark.parametrize('quantize', ['float16', 'dynamic', 'int8'])
def test_audio_quantised_exports_use_builtins_and_run(quantize):
  tf.keras.utils.set_random_seed(0)
  model = models.build_model('audio', (16000,), 12)
  rng = np.random.default_rng(1)
  waves = (0.1 * rng.standard_normal((8, 16000))).astype(np.float32)
  tflite_bytes = convert.convert_keras(model, quantize, representative_data=waves,
                                       representative_size=8)
  assert not convert.has_flex_ops(tflite_bytes)
  logits = verify.run_tflite(tflite_bytes, waves[:2])
  assert logits.shape == (2, 12) and np.all(np.isfinite(logits))


def test_flex_ops_are_refused_and_detected():
  inputs = tf.keras.Input((3, 3))
  model = tf.keras.Model(inputs, tf.linalg.inv(inputs))
  with pytest.raises(Exception, match='MatrixInverse'):
    convert.convert_keras(model)
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS,
                                         tf.lite.OpsSet.SELECT_TF_OPS]
  assert convert.has_flex_ops(converter.convert())


@pytest.mark.parametrize('kwargs, match', [
    ({'quantize': 'int4'}, 'none, float16, dynamic, int8'),
    ({'quantize': 'int8', 'representative_size': 0}, 'representative_size'),
    ({'quantize': 'int8', 'representative_size': None}, 'representative_size'),
    ({'quantize': 'int8'}, 'representative_data'),
    ({'quantize': 'dynamic', 'integer_io': True}, 'integer_io'),
])
def test_bad_arguments(kwargs, match):
  model = models.build_model('mlp', (4,), 2)
  with pytest.raises(ValueError, match=match):
    convert.convert_keras(model, **kwargs)


def test_sidecar(tmp_path, exported):
  params = sidecar.quantization_params(exported['none'])
  assert params['inputs'][0]['shape'] == [-1, 8, 8, 1]
  assert params['inputs'][0]['scale'] is None
  path = sidecar.write_sidecar(
      tmp_path / 'model.tflite', class_names=range(10), input_shape=(8, 8, 1),
      input_dtype=np.float32, preprocessing='pixels / 16', quantize='none',
      quantization_params=params, config_hash='abc123')
  assert path == tmp_path / 'model.json'
  written = json.loads(path.read_text())
  assert written['model_file'] == 'model.tflite'
  assert written['class_names'] == [str(i) for i in range(10)]
  assert written['input_shape'] == [8, 8, 1]
  assert written['input_dtype'] == 'float32'
  assert written['quantization_params'] == params
  assert written['config_hash'] == 'abc123'
  with pytest.raises(ValueError, match='unknown quantize'):
    sidecar.write_sidecar(
        tmp_path / 'm.tflite', class_names=[], input_shape=(1,),
        input_dtype='float32', preprocessing='', quantize='int4',
        quantization_params=params, config_hash='')
