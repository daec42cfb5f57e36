"""LSC's client part: the local K-similarity contrastive term beside cross-entropy.

Per example j of a batch (LSC §3.2, Eq. 3): CE(ŷ_j, h(z^c_j)) + λ L_CL,j, where z^c are
the model's penultimate features (the input of its ``logits`` layer, un-normalised for
the head) and L_CL (``ops.contrastive_tf``) takes its neighbours from the frozen
encoder embeddings the client's dataset carries per example in the field
``embedding``. The encoder never enters the computation; no gradient reaches the
embeddings. Nothing beyond FedAvg's update and metrics leaves the client.
"""

from tff_noisy.federated.client_parts import ClientPart, Needs
from tff_noisy.ops import contrastive_tf

EMBEDDING_KEY = 'embedding'


class KSimilarity(ClientPart):
  """weight * L_CL over in-batch neighbours of the ``embedding`` field (added to the
  cross-entropy part's term)."""

  needs = Needs(features=True)  # Not stackable: neighbours are taken within the batch.

  def __init__(self, k: int, temperature: float, weight: float, exclude_self: bool = True):
    if k < 1 or temperature <= 0 or weight < 0:
      raise ValueError(f'needs k >= 1, temperature > 0 and weight >= 0, got k={k}, '
                       f'temperature={temperature}, weight={weight}')
    self.k = int(k)
    self.temperature = float(temperature)
    self.weight = float(weight)
    self.exclude_self = bool(exclude_self)

  def loss(self, batch, out, ctx):
    del ctx
    if EMBEDDING_KEY not in batch:
      raise ValueError(f'{type(self).__name__} needs the per-example field '
                       f"'{EMBEDDING_KEY}' in the client dataset; it has {sorted(batch)}")
    contrast = contrastive_tf.k_similarity_loss(
        out.features, batch[EMBEDDING_KEY], self.k, self.temperature, self.exclude_self)
    return self.weight * contrast
