"""The model zoo's names, options with their defaults and one-line summaries, without
TensorFlow.

Config validation checks ``model.name`` and the options a config sets against this table
before anything heavy is imported; ``models`` builds the models from it (filling the
defaults here) and checks that one fits the data. ``tests/models/test_zoo.py`` holds the
builders to taking exactly these options.
"""

import dataclasses
from typing import Callable, Optional

from tff_noisy.errors import ConfigError
from tff_noisy.params import did_you_mean


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  summary: str
  options: dict = dataclasses.field(default_factory=dict)  # model.<option> -> default.
  # A registered model's ``builder(input_shape, num_classes, **options)``; None for the
  # zoo's own, whose builders are the modules of ``models``.
  builder: Optional[Callable] = None


MODELS = {
    'mlp': ModelSpec('Flatten -> Dense(width, relu) -> logits; the fast baseline for digits',
                     {'width': 128}),
    'small_cnn': ModelSpec('Conv32 -> Conv64 -> MaxPool -> Dense128, no normalisation '
                           "(FedLN's CPU reproduction)"),
    'mnist_cnn': ModelSpec("FedDS's MNIST CNN: two 5x5 convolutions, Dense50, dropout"),
    'pooled_cnn': ModelSpec('Conv32 -> MaxPool -> Conv64 -> MaxPool -> Dense128, no '
                            "normalisation (FedEFC's CPU reproduction)"),
    'cnn9': ModelSpec("Co-teaching's 9-layer CNN (FedEFC's MNIST model); norm: batch | group",
                      {'norm': 'batch'}),
    'resnet20': ModelSpec("ResNet-20 with option-A shortcuts (FedLN's vision model); "
                          'norm: group | batch', {'norm': 'group'}),
    'vgg9': ModelSpec("FedDS's CIFAR-10 VGG-style CNN: 6 conv3x3 (64-64-128-128-256-256) "
                      'with norm, 3 max-pools, Dense 512-512 with dropout; 3.51M trainable '
                      'parameters on 32x32x3, 10 classes; norm: batch | group', {'norm': 'batch'}),
    'resnet18': ModelSpec('ResNet-18, CIFAR form (3x3 stem, no max-pool; MaskedOptim, '
                          'FedEFC, LSC); 11.17M trainable parameters on 32x32x3, 10 classes; norm: '
                          'batch | group', {'norm': 'batch'}),
    'resnet34': ModelSpec('ResNet-34, CIFAR form (LSC on CIFAR-100); 21.33M trainable parameters '
                          'on 32x32x3, 100 classes; norm: batch | group', {'norm': 'batch'}),
    'audio': ModelSpec("FedLN's keyword-spotting CNN on a log-mel front end inside the "
                       'model (16 kHz waveforms)'),
}


def register(name: str, builder: Callable, summary: str = '',
             options: Optional[dict] = None) -> None:
  """Adds a model a config can name (``model.name: NAME``), built by ``builder(input_shape,
  num_classes, **options)``: an uncompiled Keras model whose output is its logits, from a
  Dense layer named ``'logits'`` (what LSC's and FedLN's features are taken from).
  ``options``: ``{option: default}`` the builder takes (``model.width`` and
  ``model.norm`` are the options a config can set)."""
  if not isinstance(name, str) or not name:
    raise TypeError(f'name: expected a non-empty string, got {name!r}')
  if name in MODELS:
    raise ValueError(f"name: model '{name}' is registered already")
  if not callable(builder):
    raise TypeError(f"builder: expected a callable (input_shape, num_classes, **options) -> "
                    f'tf.keras.Model, got {type(builder).__name__}')
  allowed = ('width', 'norm')
  for option in options or {}:
    if option not in allowed:
      raise ValueError(f"options: a config sets only model.{' and model.'.join(allowed)}; "
                       f"got '{option}'")
  MODELS[name] = ModelSpec(summary or f'registered: {getattr(builder, "__name__", name)}',
                           dict(options or {}), builder)


def validate(name: str, options: dict) -> None:
  """Raises ConfigError unless model ``name`` exists and takes every option in ``options``."""
  if name not in MODELS:
    raise ConfigError(f"model.name: unknown model '{name}'{did_you_mean(name, MODELS)} "
                      f"Allowed: {', '.join(MODELS)}")
  allowed = MODELS[name].options
  for option in options:
    if option not in allowed:
      raise ConfigError(f"model.{option}: model '{name}' has no option {option}; its "
                        f"options: {', '.join(allowed) or 'none'}")
