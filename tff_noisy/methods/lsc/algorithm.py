"""LSC: a local K-similarity contrastive regulariser on a frozen encoder.

docs/papers/lsc.md has the paper's equations and how its ambiguities were resolved.

Every client trains on CE + λ L_CL (``parts.py``), whose in-batch
neighbours come from a frozen encoder's embeddings; the server runs the configured
aggregator as for FedAvg. The encoder runs once per dataset and encoder, before round 1
(``prepare``), on every training example un-augmented (docs/papers/lsc.md, ambiguity
5): its L2-normalised embeddings are cached on disk (``hub.embed_cached``), kept as derived
client data (recomputed on resume, never checkpointed) and travel in each client's
dataset as the per-example field ``embedding``. The encoder never enters the TFF
computation or the communicated model, and its architecture is independent of the
client model's.

Encoders (``method.params.encoder``, ``embeddings.encoders``): PCA fitted label-free on
the training inputs, a TF-Hub handle / SavedModel directory such as ``embed pretrain``'s
SimCLR encoder, or ``random``: that SimCLR backbone randomly initialised and frozen, the
paper's Table 4 control.

``results.extra['lsc']`` reports the in-batch neighbour label purity
(``diagnostics.NeighbourPurity``), scored against the true labels after ``prepare``:
simulation truth, for reporting only, it never reaches training.
"""

import numpy as np

from tff_noisy.embeddings import encoders
from tff_noisy.federated.client_parts import CrossEntropy
from tff_noisy.methods.lsc import parts as lsc_parts
from tff_noisy.methods.lsc.diagnostics import NeighbourPurity
from tff_noisy.methods.recipe import DataPlan, Recipe, ServerStep
from tff_noisy.ops import contrastive

EMBEDDING = lsc_parts.EMBEDDING_KEY


class Embeddings(ServerStep):
  """Every training example's encoder embedding, once before training (cached), and the
  neighbour purity it gives; the data plan's ``extras`` hand each client its own."""

  def __init__(self, params):
    self.params = params
    self.width = None  # The embeddings' width, the clients' element spec's.

  def prepare(self, server) -> dict:
    data, store, setup = server.data, server.store, server.setup
    self.width = int(setup.element_spec[EMBEDDING].shape[-1])
    encoder, embeddings = encoders.embed_training_inputs(self.params, data, setup.seed)
    expected = (sum(len(data.y[cid]) for cid in data.client_ids), self.width)
    if embeddings.shape != expected:
      raise ValueError(f'encoder {encoder.encoder_id} gave embeddings of shape '
                       f'{embeddings.shape}, expected {expected}')
    embeddings = contrastive.l2_normalize(embeddings).astype(np.float32)
    own = {}
    start = 0
    for cid in data.client_ids:
      own[cid] = embeddings[start:start + len(data.y[cid])]
      store.set_derived(cid, EMBEDDING, own[cid])
      start += len(own[cid])
    return {'lsc': NeighbourPurity(own, self.params.k, setup.batch_size, setup.seed,
                                   encoder.encoder_id)}

  def extras(self, client_id, num_examples, store) -> dict:
    embeddings = store.get(client_id, EMBEDDING)
    if embeddings is None:
      raise ValueError(f"client {client_id}: no '{EMBEDDING}' values; LSC's prepare "
                       'computes them for every client before round 1')
    if np.shape(embeddings) != (num_examples, self.width):
      raise ValueError(
          f"client {client_id}: '{EMBEDDING}' has shape {np.shape(embeddings)} but its "
          f'dataset needs ({num_examples}, {self.width}): one row per example')
    return {EMBEDDING: embeddings}


def lsc(params, setup) -> Recipe:
  """CE + λ L_CL clients (``parts.KSimilarity``) with precomputed encoder embeddings."""
  del setup
  embeddings = Embeddings(params)
  fields = lambda data: {EMBEDDING: (np.float32, (encoders.embedding_width(params, data),))}
  return Recipe(parts=(CrossEntropy(), lsc_parts.KSimilarity(
      params.k, params.temperature, params.lam, params.exclude_self)),
                data=DataPlan(fields=fields, extras=embeddings.extras),
                server=(embeddings,))
