"""The model zoo: uncompiled tf.keras models that output logits.

``build_model(name, input_shape, num_classes, **options)`` builds one;
``check_model_fits`` runs the same checks without building (config validation).
The TensorFlow-free registry ``tff_noisy.zoo.MODELS`` names the models, their options and
the options' defaults; the modules here build them (each entry's target is its module's
``build``, which takes exactly its model's options, keyword-only and without defaults).
Every model's classification head is a layer named ``'logits'``;
``features_and_logits`` exposes its input (the penultimate features) as well.
"""

import numbers
import operator

import tensorflow as tf

from models import audio
from models import cnn9
from models import mlp
from models import mnist_cnn
from models import pooled_cnn
from models import resnet18
from models import resnet20
from models import resnet34
from models import small_cnn
from models import vgg9
from tff_noisy import zoo

_MODULES = {
    'mlp': mlp,
    'small_cnn': small_cnn,
    'mnist_cnn': mnist_cnn,
    'pooled_cnn': pooled_cnn,
    'cnn9': cnn9,
    'resnet20': resnet20,
    'vgg9': vgg9,
    'resnet18': resnet18,
    'resnet34': resnet34,
    'audio': audio,
}
MODEL_NAMES = tuple(_MODULES)  # The zoo's own models; ``zoo.register`` adds others.
LOGITS_LAYER = 'logits'  # Every model's classification head.


def _as_shape(input_shape) -> tuple:
  try:
    shape = tuple(operator.index(d) for d in input_shape)
  except TypeError:
    shape = None
  if not shape or min(shape) < 1:
    raise ValueError('input_shape must be a non-empty sequence of positive '
                     f'integers (no batch axis), got {input_shape!r}')
  return shape


def check_model_fits(name: str, input_shape: tuple, num_classes: int,
                     **options) -> dict:
  """Raises ValueError unless model ``name`` builds for these arguments (a ConfigError,
  ``zoo.resolve_options``'s, for a name or an option it does not take); returns its
  options with the defaults filled in."""
  options = zoo.resolve_options(name, options)
  shape = _as_shape(input_shape)
  if (isinstance(num_classes, bool) or
      not isinstance(num_classes, numbers.Integral) or num_classes < 2):
    raise ValueError('num_classes must be an integer >= 2, got '
                     f'{num_classes!r}')
  if name in _MODULES and not _MODULES[name].fits(shape):  # Else its builder checks.
    raise ValueError(f'model {name!r} does not fit input shape {shape}: it '
                     f'needs {_MODULES[name].REQUIRES}')
  return options


def build_model(name: str, input_shape: tuple, num_classes: int,
                **options) -> tf.keras.Model:
  """Builds model ``name`` for inputs of ``input_shape`` (no batch axis)."""
  options = check_model_fits(name, input_shape, num_classes, **options)
  shape = _as_shape(input_shape)
  model = zoo.MODELS[name].resolve()(shape, num_classes, **options)
  if name in _MODULES:
    return model
  return checked_model(model, f'model {name!r}', shape, num_classes)


def checked_model(model, what: str, input_shape: tuple, num_classes: int) -> tf.keras.Model:
  """``model`` if it is an uncompiled-or-not Keras model taking ``input_shape`` and giving
  ``num_classes`` logits; else a ValueError/TypeError that names ``what``."""
  if not isinstance(model, tf.keras.Model):
    raise TypeError(f'{what}: expected a tf.keras.Model, got {type(model).__name__}')
  try:
    model_input = tuple(model.input_shape[1:])
    output = tuple(model.output_shape)
  except (AttributeError, RuntimeError):
    raise ValueError(f'{what}: the model is not built; give it an Input layer or an '
                     'input_shape') from None
  if model_input != tuple(input_shape):
    raise ValueError(f'{what}: the model takes inputs of shape {model_input}, the data '
                     f'has {tuple(input_shape)}')
  if output[-1] != num_classes or len(output) != 2:
    raise ValueError(f'{what}: the model outputs {output}, expected (None, {num_classes}): '
                     'one logit per class')
  layer, activation = _output_activation(model)
  if activation:
    raise ValueError(f"{what}: the model's output layer {layer!r} applies {activation}, "
                     'but the losses take logits and apply softmax themselves (on '
                     'probabilities it trains to chance); leave the last layer linear '
                     '(activation=None)')
  return model


# Functions that turn logits into probabilities: their output is no logits.
_PROBABILITIES = {'softmax': 'softmax', 'sigmoid': 'sigmoid', 'nn.softmax': 'softmax',
                  'math.softmax': 'softmax', 'math.sigmoid': 'sigmoid',
                  'nn.sigmoid': 'sigmoid'}


def _output_activation(model: tf.keras.Model) -> tuple:
  """``(name of the output layer, 'softmax' or 'sigmoid')`` when that layer ends in one
  (an ``activation=``, a ``Softmax`` layer or ``tf.nn.softmax`` on a functional model's
  output), else ``(name, None)``; a subclassed model is not seen into."""
  names = getattr(model, 'output_names', None) or []
  try:
    layer = model.get_layer(names[0]) if names else model.layers[-1]
  except (ValueError, IndexError):
    return None, None
  if isinstance(layer, tf.keras.layers.Softmax):
    return layer.name, 'softmax'
  function = getattr(getattr(layer, 'activation', None), '__name__', None)
  return layer.name, _PROBABILITIES.get(function or getattr(layer, 'symbol', None))


def _logits_layer(model: tf.keras.Model) -> tf.keras.layers.Layer:
  try:
    return model.get_layer(LOGITS_LAYER)
  except ValueError:
    raise ValueError(f'model {model.name!r} has no {LOGITS_LAYER!r} layer: '
                     'features and logits need the classification head '
                     f'named {LOGITS_LAYER!r}') from None


def feature_dim(model: tf.keras.Model) -> int:
  """Width of the features the ``'logits'`` layer takes."""
  return int(_logits_layer(model).input.shape[-1])


def features_and_logits(model: tf.keras.Model) -> tf.keras.Model:
  """A model of the same inputs that outputs ``[features, logits]``.

  Features are the input of the ``'logits'`` layer; logits are ``model``'s
  output. Built from ``model``'s functional graph, so it shares its layers and
  variables (no copies) and traces inside a ``tf.function`` like ``model``.
  """
  head = _logits_layer(model)
  if not getattr(model, '_is_graph_network', False):
    raise ValueError(f'model {model.name!r} is not a functional Keras model')
  if len(model.outputs) != 1 or model.outputs[0] is not head.output:
    raise ValueError(f'model {model.name!r} must output its '
                     f'{LOGITS_LAYER!r} layer')
  return tf.keras.Model(model.inputs, [head.input, head.output],
                        name=f'{model.name}_features_and_logits')
