"""The frozen encoders a method can name (``EncoderParams.encoder``) and the embedding of
every training input with one, cached on disk.

- ``pca``: PCA fitted label-free on the training inputs (``embeddings.pca``).
- ``random``: the ``embed pretrain`` SimCLR backbone randomly initialised and frozen
  (``embeddings.random_init``; LSC's Table 4 control); needs images.
- anything else: a TF-Hub handle or SavedModel directory (``embeddings.hub``).

Each has its builder here, ``(params, train_inputs, seed) -> encoder``, the target of its
entry in ``embeddings.params.ENCODERS`` (``hub_encoder`` for any other name).
"""

import os

import numpy as np

from tff_noisy.data import sources
from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import pca as pca_lib
from tff_noisy.embeddings import random_init
from tff_noisy.embeddings.params import EncoderParams, ENCODERS
from tff_noisy.errors import ConfigError

RANDOM = 'random'


def pca_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int):
  """``pca``: fitted on ``train_inputs``."""
  try:
    return pca_lib.PCAEncoder.fit(train_inputs, n_components=params.pca_components,
                                  seed=seed, sqrt=params.pca_sqrt)
  except pca_lib.NegativeInputsError as e:
    raise ConfigError(f'method.params.pca_sqrt: {e}; use pca_sqrt: false for these '
                      'data') from e


def random_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int):
  """``random``: the backbone for ``train_inputs``' shape."""
  del params
  return random_init.RandomBackboneEncoder(train_inputs.shape[1:], seed)


def hub_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int):
  """The TF-Hub handle or SavedModel directory ``params.encoder``."""
  del train_inputs, seed
  size = params.encoder_input_size
  return hub_lib.HubEncoder(params.encoder, input_size=tuple(size) if size else None,
                            channels=params.encoder_channels)


def build_encoder(params: EncoderParams, train_inputs: np.ndarray, seed: int):
  """The encoder ``params`` names, fitted on ``train_inputs`` where it learns (PCA)."""
  entry = ENCODERS.get(params.encoder)
  build = hub_encoder if entry is None else entry.resolve()
  return build(params, train_inputs, seed)


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
  if params.encoder == RANDOM:
    if not random_init.fits(data.input_shape):
      raise ConfigError(f"method.params.encoder: '{RANDOM}' needs images (height, width, "
                        f'channels), got input shape {tuple(data.input_shape)}')
    return random_init.RandomBackboneEncoder.dim
  sample = next(data.x[cid][:1] for cid in data.client_ids if len(data.x[cid]))
  return int(build_encoder(params, sample, 0).embed(sample).shape[1])


def embed_training_inputs(params: EncoderParams, data, seed: int):
  """``(encoder, embeddings)`` of every client's inputs in client order, rows
  concatenated; cached on disk per encoder and data (``hub.embed_cached``)."""
  inputs = np.concatenate([data.x[cid] for cid in data.client_ids])
  encoder = build_encoder(params, inputs, seed)
  embeddings = hub_lib.embed_cached(
      encoder, inputs, os.path.join(sources.cache_root(), 'embeddings'), data.config_hash)
  return encoder, embeddings
