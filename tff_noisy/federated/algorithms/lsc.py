"""LSC: a local K-similarity contrastive regulariser on a frozen encoder (specs/lsc.md).

Every client trains on CE + λ L_CL (``objectives.contrastive``), whose in-batch
neighbours come from a frozen encoder's embeddings; the server runs the configured
aggregator as for FedAvg. The encoder runs once per dataset and encoder, before round 1
(``prepare``), on every training example un-augmented (spec §7.5's choice): its
L2-normalised embeddings are cached on disk (``hub.embed_cached``), kept as derived
client data (recomputed on resume, never checkpointed) and travel in each client's
dataset as the per-example field ``embedding``. The encoder never enters the TFF
computation or the communicated model, and its architecture is independent of the
client model's.

Encoders (``method.params.encoder``): those of NNC (``fedln.build_encoder``: PCA fitted
label-free on the training inputs, or a TF-Hub handle / SavedModel directory such as
``embed pretrain``'s SimCLR encoder), and ``random``: that SimCLR backbone randomly
initialised and frozen (``embeddings.random_init``), the paper's Table 4 control.

``results.extra['lsc']`` reports the in-batch neighbour label purity: the fraction of
the K neighbours that share the example's *true* label, over random batches of the
configured batch size, next to the chance level (the fraction of all other examples of
the batch that share it). Simulation truth, for reporting only: it never reaches
training.
"""

import os

import numpy as np

from tff_noisy.data import sources
from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import random_init
from tff_noisy.errors import ConfigError
from tff_noisy.federated.algorithms import base
from tff_noisy.federated.algorithms import fedln
from tff_noisy.federated.objectives import contrastive as objective_lib
from tff_noisy.ops import contrastive

EMBEDDING = objective_lib.EMBEDDING_KEY
RANDOM = 'random'


def build_encoder(params, train_inputs: np.ndarray, seed: int):
  """NNC's encoders (``fedln.build_encoder``) plus ``random`` (see the module doc)."""
  if params.encoder == RANDOM:
    return random_init.RandomBackboneEncoder(train_inputs.shape[1:], seed)
  return fedln.build_encoder(params, train_inputs, seed)


def embedding_width(params, data) -> int:
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
  return int(fedln.build_encoder(params, sample, 0).embed(sample).shape[1])


def in_batch_purity(embeddings: np.ndarray, labels: np.ndarray, k: int, batch_size: int,
                    rng: np.random.Generator) -> np.ndarray:
  """[neighbours sharing the label, neighbours, others sharing it, others] summed over
  one random split of a client's examples into batches of ``batch_size``."""
  counts = np.zeros(4, np.int64)
  order = rng.permutation(len(labels))
  for start in range(0, len(order), batch_size):
    batch = order[start:start + batch_size]
    counts += (*contrastive.neighbour_purity(embeddings[batch], labels[batch], k),
               *contrastive.neighbour_purity(embeddings[batch], labels[batch], len(batch)))
  return counts


class LSC(base.Method):
  """CE + λ L_CL clients (``KSimilarityObjective``) with precomputed encoder embeddings."""

  @classmethod
  def dataset_fields(cls, params, data) -> dict:
    return {EMBEDDING: (np.float32, (embedding_width(params, data),))}

  @classmethod
  def objective(cls, params, setup):
    return objective_lib.KSimilarityObjective(params.k, params.temperature, params.lam,
                                              params.exclude_self)

  @property
  def width(self) -> int:
    return int(self.setup.element_spec[EMBEDDING].shape[-1])

  def prepare(self, data, store) -> dict:
    """Embeds every training example once (cached); reports the neighbour purity."""
    inputs = np.concatenate([data.x[cid] for cid in data.client_ids])
    encoder = build_encoder(self.params, inputs, self.setup.seed)
    embeddings = hub_lib.embed_cached(
        encoder, inputs, os.path.join(sources.cache_root(), 'embeddings'), data.config_hash)
    if embeddings.shape != (len(inputs), self.width):
      raise ValueError(f'encoder {encoder.encoder_id} gave embeddings of shape '
                       f'{embeddings.shape}, expected ({len(inputs)}, {self.width})')
    embeddings = contrastive.l2_normalize(embeddings).astype(np.float32)
    counts = np.zeros(4, np.int64)
    start = 0
    for index, cid in enumerate(data.client_ids):
      n = len(data.y[cid])
      own = embeddings[start:start + n]
      store.set_derived(cid, EMBEDDING, own)
      rng = np.random.default_rng([self.setup.seed, index])
      counts += in_batch_purity(own, data.y_true[cid], self.params.k,
                                self.setup.batch_size or max(n, 1), rng)
      start += n
    same, neighbours, same_others, others = (int(c) for c in counts)
    return {'lsc': {
        'encoder': encoder.encoder_id, 'embedding_width': self.width,
        'neighbour_purity': same / neighbours if neighbours else None,
        'same_label_chance': same_others / others if others else None,
        'purity_batch_size': self.setup.batch_size, 'k': self.params.k}}

  def client_extras(self, client_id, num_examples, store) -> dict:
    embeddings = store.get(client_id, EMBEDDING)
    if embeddings is None:
      raise ValueError(f"client {client_id}: no '{EMBEDDING}' values; LSC's prepare "
                       'computes them for every client before round 1')
    if np.shape(embeddings) != (num_examples, self.width):
      raise ValueError(
          f"client {client_id}: '{EMBEDDING}' has shape {np.shape(embeddings)} but its "
          f'dataset needs ({num_examples}, {self.width}): one row per example')
    return {EMBEDDING: embeddings}
