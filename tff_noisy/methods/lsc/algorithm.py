"""LSC: a local K-similarity contrastive regulariser on a frozen encoder.

docs/papers/lsc.md has the paper's equations and how its ambiguities were resolved.

Every client trains on CE + λ L_CL (``parts.py``), whose in-batch
neighbours come from a frozen encoder's embeddings; the server runs the configured
aggregator as for FedAvg. The encoder runs once per dataset and encoder, before round 1
(``prepare``, ``methods.client_embeddings``), on every training example un-augmented (docs/papers/lsc.md, ambiguity
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

from tff_noisy.federated.client_parts import CrossEntropy
from tff_noisy.methods import client_embeddings
from tff_noisy.methods.lsc import parts as lsc_parts
from tff_noisy.methods.lsc.diagnostics import NeighbourPurity
from tff_noisy.methods.recipe import DataPlan, Recipe

EMBEDDING = lsc_parts.EMBEDDING_KEY


class Embeddings(client_embeddings.ClientEmbeddings):
  """Every training example's L2-normalised encoder embedding, once before training
  (cached), and the neighbour purity it gives; the data plan's ``extras`` hand each
  client its own."""

  def __init__(self, params):
    super().__init__(params, EMBEDDING, normalize=True, method='LSC')

  def prepare(self, server) -> dict:
    encoder, own = self.embed(server)
    return {'lsc': NeighbourPurity(own, self.params.k, server.setup.batch_size,
                                   server.setup.seed, encoder.encoder_id)}


def lsc(params, setup) -> Recipe:
  """CE + λ L_CL clients (``parts.KSimilarity``) with precomputed encoder embeddings."""
  del setup
  embeddings = Embeddings(params)
  return Recipe(parts=(CrossEntropy(), lsc_parts.KSimilarity(
      params.k, params.temperature, params.lam, params.exclude_self)),
                data=DataPlan(fields=embeddings.fields, extras=embeddings.extras),
                server=(embeddings,))
