"""The model zoo: shapes, parameter counts, norms and the registry's errors."""

import numpy as np
import pytest
import tensorflow as tf

import models
from models import audio
from models import layers
from models import resnet20


@pytest.mark.parametrize('name, input_shape, options, params', [
    # Flatten 64 -> 128 -> 10: exact.
    ('mlp', (8, 8, 1), {}, 64 * 128 + 128 + 128 * 10 + 10),
    ('small_cnn', (28, 28, 1), {},
     320 + 18_496 + 14 * 14 * 64 * 128 + 128 + 1_290),
    ('small_cnn', (8, 8, 1), {}, 320 + 18_496 + 4 * 4 * 64 * 128 + 128 + 1_290),
    ('mlp', (28, 28, 1), {'width': 1024}, 784 * 1024 + 1024 + 1024 * 10 + 10),
    ('pooled_cnn', (28, 28, 1), {}, 320 + 18_496 + 7 * 7 * 64 * 128 + 128 + 1_290),
    ('pooled_cnn', (8, 8, 1), {}, 320 + 18_496 + 2 * 2 * 64 * 128 + 128 + 1_290),
    # The FedDS paper's MNIST CNN: 260 + 5,020 + 16,050 + 510.
    ('mnist_cnn', (28, 28, 1), {}, 21_840),
    # Co-teaching's CNN has about 4.4M parameters.
    ('cnn9', (28, 28, 1), {}, (4.3e6, 4.5e6)),
    ('cnn9', (32, 32, 3), {'norm': 'group'}, (4.3e6, 4.5e6)),
    # He et al. (2016), Table 6: ResNet-20 has 0.27M parameters.
    ('resnet20', (32, 32, 3), {}, (0.26e6, 0.28e6)),
    ('resnet20', (32, 32, 3), {'norm': 'batch'}, (0.26e6, 0.28e6)),
    ('resnet20', (8, 8, 1), {}, (0.26e6, 0.28e6)),
    ('audio', (16000,), {}, (0.1e6, 0.2e6)),
])
def test_builds_logits_for_intended_shape(name, input_shape, options, params):
  model = models.build_model(name, input_shape, 10, **options)
  logits = model(np.random.default_rng(0).random((2, *input_shape), 'float32'))
  assert logits.shape == (2, 10)
  assert model.layers[-1].activation is tf.keras.activations.linear
  assert not model.compiled_loss
  if isinstance(params, tuple):
    assert params[0] <= model.count_params() <= params[1]
  else:
    assert model.count_params() == params


def test_model_names():
  assert models.MODEL_NAMES == ('mlp', 'small_cnn', 'mnist_cnn', 'pooled_cnn', 'cnn9', 'resnet20',
                               'vgg9', 'resnet18', 'resnet34', 'audio')


@pytest.mark.parametrize('name, num_classes, options, trainable', [
    # torchvision-style counts of the CIFAR variants (BatchNorm's statistics are buffers).
    ('resnet18', 10, {}, 11_173_962),
    ('resnet18', 10, {'norm': 'group'}, 11_173_962),
    ('resnet34', 10, {}, 21_282_122),
    ('resnet34', 100, {}, 21_328_292),
    # FedDS's VGG-style CNN: convs 1,145,408 + norms 1,792 + Dense 4096-512-512-10 2,365,450.
    ('vgg9', 10, {}, 3_512_650),
])
def test_paper_models_have_the_papers_parameter_counts(name, num_classes, options, trainable):
  tf.keras.utils.set_random_seed(0)
  model = models.build_model(name, (32, 32, 3), num_classes, **options)
  assert sum(int(np.prod(v.shape)) for v in model.trainable_variables) == trainable
  assert model(np.zeros((2, 32, 32, 3), 'float32')).shape == (2, num_classes)
  stats = 0 if options.get('norm') == 'group' else 2
  norms = sum(isinstance(l, tf.keras.layers.BatchNormalization) for l in model.layers)
  assert len(model.non_trainable_variables) == stats * norms
  assert norms == {'resnet18': 20, 'resnet34': 36, 'vgg9': 6}[name] or not stats
  assert not model.losses  # No L2 in the model: fl.weight_decay sets it, as the papers'.
  x = np.random.default_rng(0).random((4, 32, 32, 3), 'float32')
  y = np.arange(4) % num_classes
  loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  with tf.GradientTape() as tape:
    before = loss_fn(y, model(x, training=True))
  grads = tape.gradient(before, model.trainable_variables)
  assert all(np.isfinite(g.numpy()).all() for g in grads)
  tf.keras.optimizers.SGD(0.01).apply_gradients(zip(grads, model.trainable_variables))
  assert loss_fn(y, model(x, training=True)) < before  # One step trains.


def test_resnet20_norms():
  group = models.build_model('resnet20', (32, 32, 3), 10)
  batch = models.build_model('resnet20', (32, 32, 3), 10, norm='batch')
  assert not group.non_trainable_variables
  assert any(isinstance(l, tf.keras.layers.GroupNormalization)
             for l in group.layers)
  # Moving mean and variance of 19 BatchNorm layers.
  assert len(batch.non_trainable_variables) == 2 * 19
  assert len(group.losses) == 20  # L2 on 19 convs and the dense kernel.


def test_cnn9_defaults_to_batch_norm_as_in_the_paper():
  model = models.build_model('cnn9', (28, 28, 1), 10)
  assert len(model.non_trainable_variables) == 2 * 9


@pytest.mark.parametrize('shape', [(3, 5, 4, 8), (3, 7, 8), (3, 8)])
def test_group_normalization_matches_keras(shape):
  x = np.random.default_rng(0).normal(2.0, 3.0, shape).astype('float32')
  ours = layers.GroupNormalization(4)
  keras = tf.keras.layers.GroupNormalization(4)
  ours.build(x.shape)
  keras.build(x.shape)
  weights = [np.linspace(0.5, 2.0, 8), np.linspace(-1.0, 1.0, 8)]
  ours.set_weights(weights)
  keras.set_weights(weights)
  np.testing.assert_allclose(ours(x), keras(x), atol=1e-5)


def test_option_a_shortcut_subsamples_and_zero_pads():
  x = np.random.default_rng(0).random((1, 4, 4, 16), 'float32')
  y = resnet20.OptionAShortcut(32, 2)(x).numpy()
  np.testing.assert_array_equal(y[..., 8:24], x[:, ::2, ::2, :])
  assert not y[..., :8].any() and not y[..., 24:].any()


def test_log_mel_front_end():
  front_end = audio.LogMelFrontEnd()
  t = np.arange(16000) / 16000
  wave = np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 3000 * t)])
  log_mel = front_end(wave.astype('float32')).numpy()
  assert log_mel.shape == (2, 98, 64, 1)
  assert front_end.compute_output_shape((None, 16000)) == (None, 98, 64, 1)
  # The waveform is L2-normalised first, so loudness does not matter.
  np.testing.assert_allclose(front_end(3 * wave.astype('float32')), log_mel,
                             atol=2e-3)
  # Standardised per example.
  np.testing.assert_allclose(log_mel.mean(axis=(1, 2, 3)), 0, atol=1e-4)
  np.testing.assert_allclose(log_mel.std(axis=(1, 2, 3)), 1, atol=1e-3)
  # 440 Hz peaks in a lower mel bin than 3 kHz.
  peaks = log_mel[:, :, :, 0].mean(axis=1).argmax(axis=1)
  assert peaks[0] < peaks[1]


@pytest.mark.parametrize('name, input_shape', [
    ('resnet20', (32, 32, 3)), ('audio', (16000,))])
def test_clone_model_round_trips_custom_layers(name, input_shape):
  model = models.build_model(name, input_shape, 10)
  clone = tf.keras.models.clone_model(model)
  clone.set_weights(model.get_weights())
  x = np.random.default_rng(0).random((1, *input_shape), 'float32')
  np.testing.assert_allclose(clone(x), model(x), atol=1e-5)


@pytest.mark.parametrize('name, input_shape, needs', [
    ('small_cnn', (16000,), 'at least 2x2'),
    ('mnist_cnn', (8, 8, 1), 'at least 16x16'),
    ('pooled_cnn', (2, 2, 1), 'at least 4x4'),
    ('cnn9', (8, 8, 1), 'at least 28x28'),
    ('resnet20', (4, 4, 1), 'at least 8x8'),
    ('resnet20', (16000,), 'at least 8x8'),
    ('audio', (28, 28, 1), '1-D 16000 Hz waveform'),
    ('audio', (1000,), f'at least {audio.MIN_SAMPLES} samples'),
])
def test_shape_that_does_not_fit(name, input_shape, needs):
  with pytest.raises(ValueError, match=rf"'{name}'.*{input_shape}.*{needs}"):
    models.check_model_fits(name, input_shape, 10)
  with pytest.raises(ValueError, match=needs):
    models.build_model(name, input_shape, 10)


@pytest.mark.parametrize('args, options, match', [
    (('lenet', (28, 28, 1), 10), {}, 'unknown model .*mlp, small_cnn, mnist_cnn, pooled_cnn, cnn9'),
    (('mlp', (), 10), {}, 'input_shape'),
    (('mlp', (8, 0), 10), {}, 'input_shape'),
    (('mlp', 'abc', 10), {}, 'input_shape'),
    (('mlp', (8, 8), 1), {}, 'num_classes'),
    (('mlp', (8, 8), 2.0), {}, 'num_classes'),
    (('mlp', (8, 8), 10), {'norm': 'group'}, "model.norm: not a parameter of 'mlp'"),
    (('mlp', (8, 8), 10), {'width': 0}, 'model.width: needs an integer >= 1, got 0'),
    (('mlp', (8, 8), 10), {'width': 1.5}, 'model.width: needs an integer, got 1.5'),
    (('small_cnn', (8, 8, 1), 10), {'width': 64}, "model.width: not a parameter of 'small_cnn'"),
    (('resnet20', (8, 8, 1), 10), {'depth': 20}, 'Allowed: norm$'),
    (('resnet20', (8, 8, 1), 10), {'norm': 'layer'}, "needs 'group' or 'batch', got 'layer'"),
])
def test_bad_arguments(args, options, match):
  with pytest.raises(ValueError, match=match):
    models.check_model_fits(*args, **options)


def test_check_model_fits_does_not_build(monkeypatch):
  def build(input_shape, num_classes, *, norm='group'):
    raise AssertionError('built')
  monkeypatch.setattr(resnet20, 'build', build)
  models.check_model_fits('resnet20', [32, 32, 3], np.int64(10), norm='batch')


# The smallest input each model takes, the width its head sees and an option
# that brings BatchNorm's non-trainable statistics in where there is one.
_SMALL = {
    'mlp': ((8, 8, 1), {}, 128),
    'small_cnn': ((8, 8, 1), {}, 128),
    'mnist_cnn': ((16, 16, 1), {}, 50),
    'pooled_cnn': ((4, 4, 1), {}, 128),
    'cnn9': ((28, 28, 1), {}, 128),
    'resnet20': ((8, 8, 1), {'norm': 'batch'}, 64),
    'vgg9': ((8, 8, 3), {}, 512),
    'resnet18': ((8, 8, 3), {}, 512),
    'resnet34': ((8, 8, 1), {'norm': 'group'}, 512),
    'audio': ((audio.MIN_SAMPLES,), {}, 128),
}


def test_small_shapes_cover_the_zoo():
  assert tuple(_SMALL) == models.MODEL_NAMES


@pytest.fixture(scope='module', params=models.MODEL_NAMES)
def zoo_model(request):
  input_shape, options, width = _SMALL[request.param]
  model = models.build_model(request.param, input_shape, 10, **options)
  x = np.random.default_rng(0).random((3, *input_shape), 'float32')
  return model, x, width


def test_head_is_named_logits_and_holds_the_last_weights(zoo_model):
  model, _, _ = zoo_model
  head = model.get_layer(models.LOGITS_LAYER)
  assert model.layers[-1] is head
  assert model.outputs[0] is head.output
  assert model.weights[-2:] == head.weights  # Kernel and bias come last.


def test_features_and_logits_shares_the_model(zoo_model):
  model, x, width = zoo_model
  assert models.feature_dim(model) == width
  features_model = models.features_and_logits(model)
  features, logits = features_model(x, training=False)
  assert features.shape == (len(x), width)
  np.testing.assert_array_equal(logits, model(x, training=False))
  head = model.get_layer(models.LOGITS_LAYER)
  np.testing.assert_array_equal(head(features), logits)
  # The very same variables, in the same order: nothing is copied.
  assert len(features_model.trainable_variables) == len(
      model.trainable_variables)
  for ours, theirs in zip(features_model.trainable_variables,
                          model.trainable_variables):
    assert ours is theirs
  assert len(features_model.variables) == len(model.variables)
  assert all(a is b for a, b in zip(features_model.variables, model.variables))


def test_features_and_logits_in_a_graph(zoo_model):
  model, x, _ = zoo_model
  features_model = models.features_and_logits(model)

  @tf.function
  def features_and_logits(x):
    return features_model(x, training=False), model(x, training=False)

  (features, logits), expected = features_and_logits(x)
  np.testing.assert_array_equal(logits, expected)
  eager_features, _ = features_model(x, training=False)
  # Graph and eager kernels round differently; over ResNet-34's 33 convolutions the
  # features (~3) differed by up to 1.5e-5.
  np.testing.assert_allclose(features, eager_features, rtol=1e-4, atol=1e-4)


def test_gradient_of_features_reaches_the_shared_variables(zoo_model):
  model, x, _ = zoo_model
  features_model = models.features_and_logits(model)
  with tf.GradientTape() as tape:
    features, _ = features_model(x, training=False)
    loss = tf.reduce_sum(tf.square(features))
  head = set(id(v) for v in model.get_layer(models.LOGITS_LAYER).weights)
  gradients = tape.gradient(loss, model.trainable_variables)
  for variable, gradient in zip(model.trainable_variables, gradients):
    if id(variable) in head:
      assert gradient is None, variable.name  # The head is past the features.
    else:
      assert gradient is not None, variable.name
  assert any(np.any(g.numpy()) for g in gradients if g is not None)


def test_features_and_logits_needs_a_logits_layer():
  inputs = tf.keras.Input(shape=(4,))
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(inputs), name='bare')
  with pytest.raises(ValueError, match="'bare' has no 'logits' layer"):
    models.features_and_logits(model)
  with pytest.raises(ValueError, match="'bare' has no 'logits' layer"):
    models.feature_dim(model)
