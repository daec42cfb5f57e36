"""The model zoo: uncompiled tf.keras models that output logits.

``build_model(name, input_shape, num_classes, **options)`` builds one;
``check_model_fits`` runs the same checks without building (config validation).
"""

import inspect
import numbers
import operator

import tensorflow as tf

from models import audio
from models import cnn9
from models import layers
from models import mlp
from models import mnist_cnn
from models import resnet20
from models import small_cnn

_MODULES = {
    'mlp': mlp,
    'small_cnn': small_cnn,
    'mnist_cnn': mnist_cnn,
    'cnn9': cnn9,
    'resnet20': resnet20,
    'audio': audio,
}
MODEL_NAMES = tuple(_MODULES)


def _options(name: str) -> list:
  params = inspect.signature(_MODULES[name].build).parameters.values()
  return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


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
                     **options) -> None:
  """Raises ValueError unless model ``name`` builds for these arguments."""
  if name not in _MODULES:
    raise ValueError(f'unknown model {name!r}; allowed: '
                     f'{", ".join(MODEL_NAMES)}')
  shape = _as_shape(input_shape)
  if (isinstance(num_classes, bool) or
      not isinstance(num_classes, numbers.Integral) or num_classes < 2):
    raise ValueError('num_classes must be an integer >= 2, got '
                     f'{num_classes!r}')
  module = _MODULES[name]
  if not module.fits(shape):
    raise ValueError(f'model {name!r} does not fit input shape {shape}: it '
                     f'needs {module.REQUIRES}')
  unknown = sorted(set(options) - set(_options(name)))
  if unknown:
    raise ValueError(f'model {name!r} has no option {", ".join(unknown)}; its '
                     f'options: {", ".join(_options(name)) or "none"}')
  if 'norm' in options:
    layers.check_norm(options['norm'])
  if 'width' in options:
    mlp.check_width(options['width'])


def build_model(name: str, input_shape: tuple, num_classes: int,
                **options) -> tf.keras.Model:
  """Builds model ``name`` for inputs of ``input_shape`` (no batch axis)."""
  check_model_fits(name, input_shape, num_classes, **options)
  return _MODULES[name].build(_as_shape(input_shape), num_classes, **options)
