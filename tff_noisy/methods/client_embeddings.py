"""Every training example's frozen-encoder embedding, handed to its client as a
per-example field of its dataset (LSC's neighbours, FedLN-AKD's distillation targets).

The encoder runs once per dataset and encoder, before round 1, on every training
example un-augmented (``encoders.embed_training_inputs``, cached on disk); the
embeddings are kept as derived client data (recomputed on resume, never checkpointed).
The encoder never enters the TFF computation or the communicated model.
"""

import numpy as np

from tff_noisy.embeddings import encoders
from tff_noisy.methods.recipe import ServerStep
from tff_noisy.ops import contrastive


class ClientEmbeddings(ServerStep):
  """The embeddings of each client's examples under ``key``, computed in ``prepare``
  (L2-normalised when ``normalize``); the data plan's ``extras`` hand each client its own."""

  def __init__(self, params, key: str, normalize: bool, method: str):
    self.params = params
    self.key = key
    self.normalize = bool(normalize)
    self.method = method  # Named in the errors.
    self.width = None  # The embeddings' width, the clients' element spec's.

  def fields(self, data) -> dict:
    """The data plan's ``fields``: the per-example embedding of the encoder's width."""
    return {self.key: (np.float32, (encoders.embedding_width(self.params, data),))}

  def embed(self, server):
    """``(encoder, {client id: embeddings [n, D] float32})``, stored for every client."""
    data, store, setup = server.data, server.store, server.setup
    self.width = int(setup.element_spec[self.key].shape[-1])
    encoder, embeddings = encoders.embed_training_inputs(self.params, data, setup.seed)
    expected = (sum(len(data.y[cid]) for cid in data.client_ids), self.width)
    if embeddings.shape != expected:
      raise ValueError(f'encoder {encoder.encoder_id} gave embeddings of shape '
                       f'{embeddings.shape}, expected {expected}')
    if self.normalize:
      embeddings = contrastive.l2_normalize(embeddings)
    embeddings = np.asarray(embeddings).astype(np.float32)
    own = {}
    start = 0
    for cid in data.client_ids:
      own[cid] = embeddings[start:start + len(data.y[cid])]
      store.set_derived(cid, self.key, own[cid])
      start += len(own[cid])
    return encoder, own

  def prepare(self, server) -> dict:
    self.embed(server)
    return {}

  def extras(self, client_id, num_examples, store) -> dict:
    embeddings = store.get(client_id, self.key)
    if embeddings is None:
      raise ValueError(f"client {client_id}: no '{self.key}' values; {self.method}'s "
                       'prepare computes them for every client before round 1')
    if np.shape(embeddings) != (num_examples, self.width):
      raise ValueError(
          f"client {client_id}: '{self.key}' has shape {np.shape(embeddings)} but its "
          f'dataset needs ({num_examples}, {self.width}): one row per example')
    return {self.key: embeddings}
