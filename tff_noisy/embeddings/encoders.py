"""The frozen encoders a method can name (``EncoderParams.encoder``) and the embedding of
every training input with one, cached on disk.

- ``pca``: PCA fitted label-free on the training inputs (``embeddings.pca``).
- ``random``: the ``embed pretrain`` SimCLR backbone randomly initialised and frozen
  (``embeddings.random_init``; LSC's Table 4 control); needs images.
- ``efficientnet_lite0``: ImageNet EfficientNet-Lite0, frozen, from an installed
  package's weights (``embeddings.efficientnet_lite``); needs images.
- ``control_supervised``: a CONTROL that sees clean labels of images no client holds,
  an upper bound, not a method (``embeddings.control``); only where named exactly.
- anything else: a TF-Hub handle or SavedModel directory (``embeddings.hub``).

Each has its builder here, ``(params, train_inputs, seed, data) -> encoder``, the target
of its entry in ``embeddings.params.ENCODERS`` (``hub_encoder`` for any other name).
"""

import os

import numpy as np

from tff_noisy.data import sources
from tff_noisy.embeddings import control
from tff_noisy.embeddings import efficientnet_lite
from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import pca as pca_lib
from tff_noisy.embeddings import random_init
from tff_noisy.embeddings.params import CONTROL, EncoderParams, ENCODERS
from tff_noisy.errors import ConfigError

RANDOM = 'random'
EFFICIENTNET = 'efficientnet_lite0'


def pca_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int, data=None):
  """``pca``: fitted on ``train_inputs``."""
  del data
  try:
    return pca_lib.PCAEncoder.fit(train_inputs, n_components=params.pca_components,
                                  seed=seed, sqrt=params.pca_sqrt)
  except pca_lib.NegativeInputsError as e:
    raise ConfigError(f'method.params.pca_sqrt: {e}; use pca_sqrt: false for these '
                      'data') from e


def random_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int, data=None):
  """``random``: the backbone for ``train_inputs``' shape."""
  del params, data
  return random_init.RandomBackboneEncoder(train_inputs.shape[1:], seed)


def efficientnet_lite0_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int,
                               data=None):
  """``efficientnet_lite0``: resizing to ``encoder_input_size`` if given."""
  del train_inputs, seed, data
  size = params.encoder_input_size or efficientnet_lite.INPUT_SIZE
  try:
    return efficientnet_lite.EfficientNetLite0Encoder(tuple(size))
  except efficientnet_lite.WeightsNotInstalledError as e:
    raise ConfigError(str(e)) from None


def control_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int, data=None):
  """``control_supervised``: trained on the held-out images of ``data``."""
  del train_inputs
  if params.encoder != CONTROL or data is None:  # Never built by another route.
    raise ConfigError(f"method.params.encoder: the control is built only where a config "
                      f"names '{CONTROL}', with the run's data")
  x, y = control.held_out(data)
  return control.SupervisedControlEncoder(x, y, data.num_classes, seed)


def hub_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int, data=None):
  """The TF-Hub handle or SavedModel directory ``params.encoder``."""
  del train_inputs, seed, data
  size = params.encoder_input_size
  return hub_lib.HubEncoder(params.encoder, input_size=tuple(size) if size else None,
                            channels=params.encoder_channels)


def build_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int, data=None):
  """The encoder ``params`` names, fitted on ``train_inputs`` where it learns (PCA);
  ``data`` (the run's ``FederatedData``) is what the control holds out from."""
  entry = ENCODERS.get(params.encoder)
  build = hub_encoder if entry is None else entry.resolve()
  return build(params, train_inputs, seed, data)


def embedding_width(params: EncoderParams, data) -> int:
  """The encoder's embedding width, known before the embeddings are computed.

  PCA: ``pca_components`` (at most the examples' and the features' count); ``random``:
  the backbone's; a hub encoder is loaded and embeds one example.
  """
  if params.encoder == 'pca':
    most = min(int(np.prod(data.input_shape)), sum(len(y) for y in data.y.values()))
    if params.pca_components > most:
      raise ConfigError(f'method.params.pca_components: needs at most {most} (the '
                        f'features and examples of the data), got {params.pca_components}')
    return params.pca_components
  if params.encoder in (RANDOM, EFFICIENTNET, CONTROL):
    if not random_init.fits(data.input_shape):
      raise ConfigError(f"method.params.encoder: '{params.encoder}' needs images (height, "
                        f'width, channels), got input shape {tuple(data.input_shape)}')
    if params.encoder == EFFICIENTNET:
      efficientnet_lite.weights_path()  # Installed, or a clear error before any work.
      return efficientnet_lite.DIM
    if params.encoder == CONTROL:
      control.held_out(data)  # Something to train on, or a clear error before any work.
    return random_init.RandomBackboneEncoder.dim
  sample = next(data.x[cid][:1] for cid in data.client_ids if len(data.x[cid]))
  return int(build_encoder(params, sample, 0, data).embed(sample).shape[1])


def embed_training_inputs(params: EncoderParams, data, seed: int):
  """``(encoder, embeddings)`` of every client's inputs in client order, rows
  concatenated; cached on disk per encoder and data (``hub.embed_cached``)."""
  inputs = np.concatenate([data.x[cid] for cid in data.client_ids])
  encoder = build_encoder(params, inputs, seed, data)
  embeddings = hub_lib.embed_cached(
      encoder, inputs, os.path.join(sources.cache_root(), 'embeddings'), data.config_hash)
  return encoder, embeddings
