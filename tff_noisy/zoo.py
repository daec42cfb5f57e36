"""The model zoo's names, summaries and options (``model.width``, ``model.norm``) with
their defaults, without TensorFlow.

Config validation checks ``model.name`` and the options a config sets against this
registry before anything heavy is imported; ``models`` builds a model with its entry's
target (the builder, called with every option's value) and checks that it fits the data.
``tests/models/test_zoo.py`` holds the builders to taking exactly their entry's options.
"""

import dataclasses
import typing
from typing import Callable, ClassVar, Optional

from tff_noisy import registry
from tff_noisy.params import Params, require

NORMS = ('group', 'batch')  # model.norm: GroupNorm or BatchNorm layers.


@dataclasses.dataclass(frozen=True)
class ModelParams(Params):
  """The options a model takes (a config's ``model.<option>``): none; the base of the
  option classes, whose defaults are a model's own."""
  prefix: ClassVar[str] = 'model.'


@dataclasses.dataclass(frozen=True)
class WidthParams(ModelParams):
  width: int = 128

  def check(self, context):
    require(self.width >= 1, 'width', 'an integer >= 1', self.width, self.prefix)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class BatchNormParams(ModelParams):
  norm: str = 'batch'

  def check(self, context):
    require(self.norm in NORMS, 'norm', ' or '.join(map(repr, NORMS)), self.norm, self.prefix)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class GroupNormParams(BatchNormParams):
  norm: str = 'group'


OPTIONS = {'width': WidthParams, 'norm': BatchNormParams}  # What a config can set.

MODELS = registry.Registry('model.name', 'model', {
    'mlp': registry.Entry(
        'Flatten -> Dense(width, relu) -> logits; the fast baseline for digits',
        WidthParams, 'models.mlp:build'),
    'small_cnn': registry.Entry(
        "Conv32 -> Conv64 -> MaxPool -> Dense128, no normalisation (FedLN's CPU "
        'reproduction)', ModelParams, 'models.small_cnn:build'),
    'mnist_cnn': registry.Entry("FedDS's MNIST CNN: two 5x5 convolutions, Dense50, dropout",
                                ModelParams, 'models.mnist_cnn:build'),
    'pooled_cnn': registry.Entry(
        "Conv32 -> MaxPool -> Conv64 -> MaxPool -> Dense128, no normalisation (FedEFC's "
        'CPU reproduction)', ModelParams, 'models.pooled_cnn:build'),
    'cnn9': registry.Entry(
        "Co-teaching's 9-layer CNN (FedEFC's MNIST model); norm: batch | group",
        BatchNormParams, 'models.cnn9:build'),
    'resnet20': registry.Entry(
        "ResNet-20 with option-A shortcuts (FedLN's vision model); norm: group | batch",
        GroupNormParams, 'models.resnet20:build'),
    'vgg9': registry.Entry(
        "FedDS's CIFAR-10 VGG-style CNN: 6 conv3x3 (64-64-128-128-256-256) with norm, 3 "
        'max-pools, Dense 512-512 with dropout; 3.51M trainable parameters on 32x32x3, 10 '
        'classes; norm: batch | group', BatchNormParams, 'models.vgg9:build'),
    'resnet18': registry.Entry(
        'ResNet-18, CIFAR form (3x3 stem, no max-pool; MaskedOptim, FedEFC, LSC); 11.17M '
        'trainable parameters on 32x32x3, 10 classes; norm: batch | group',
        BatchNormParams, 'models.resnet18:build'),
    'resnet34': registry.Entry(
        'ResNet-34, CIFAR form (LSC on CIFAR-100); 21.33M trainable parameters on 32x32x3, '
        '100 classes; norm: batch | group', BatchNormParams, 'models.resnet34:build'),
    'audio': registry.Entry(
        "FedLN's keyword-spotting CNN on a log-mel front end inside the model (16 kHz "
        'waveforms)', ModelParams, 'models.audio:build'),
})


def register(name: str, builder: Callable, summary: str = '',
             options: Optional[dict] = None) -> None:
  """Adds a model a config can name (``model.name: NAME``), built by ``builder(input_shape,
  num_classes, **options)``: an uncompiled Keras model whose output is its logits, from a
  Dense layer named ``'logits'`` (what LSC's and FedLN's features are taken from).
  ``options``: ``{option: default}`` the builder takes (``model.width`` and
  ``model.norm`` are the options a config can set, checked as the zoo's are)."""
  if not callable(builder):
    raise TypeError(f"builder: expected a callable (input_shape, num_classes, **options) -> "
                    f'tf.keras.Model, got {type(builder).__name__}')
  options = dict(options or {})
  for option in options:
    if option not in OPTIONS:
      raise ValueError(f"options: a config sets only model.{' and model.'.join(OPTIONS)}; "
                       f"got '{option}'")
  params = dataclasses.make_dataclass(
      'RegisteredModelParams',
      [(option, typing.get_type_hints(OPTIONS[option])[option], dataclasses.field(default=value))
       for option, value in options.items()],
      bases=tuple(OPTIONS[option] for option in options) or (ModelParams,), frozen=True)
  MODELS.register(name, registry.Entry(
      summary or f'registered: {getattr(builder, "__name__", name)}', params, builder))


def resolve_options(name: str, options: dict) -> dict:
  """Model ``name``'s options: ``options`` (those a config sets) with its defaults filled in,
  checked; a ConfigError naming ``model.name`` or the option."""
  return MODELS.lookup(name).params.from_mapping(options, None, name).as_dict()
