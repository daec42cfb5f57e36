"""LSC's client objective: cross-entropy plus the local K-similarity contrastive term.

Per example j of a batch (LSC §3.2, Eq. 3): CE(ŷ_j, h(z^c_j)) + λ L_CL,j, where z^c are
the model's penultimate features (the input of its ``logits`` layer, un-normalised for
the head) and L_CL (``ops.contrastive_tf``) takes its neighbours from the frozen
encoder embeddings the client's dataset carries per example in the field
``embedding``. The encoder never enters the computation; no gradient reaches the
embeddings. Nothing beyond FedAvg's update and metrics leaves the client.
"""

from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import contrastive_tf
from tff_noisy.ops import losses

EMBEDDING_KEY = 'embedding'


class KSimilarityObjective(ClientObjective):
  """CE + weight * L_CL over in-batch neighbours of the ``embedding`` field."""

  uses_features = True
  per_example_loss = False  # Neighbours are taken within the batch.

  def __init__(self, k: int, temperature: float, weight: float, exclude_self: bool = True):
    super().__init__()
    if k < 1 or temperature <= 0 or weight < 0:
      raise ValueError(f'needs k >= 1, temperature > 0 and weight >= 0, got k={k}, '
                       f'temperature={temperature}, weight={weight}')
    self.k = int(k)
    self.temperature = float(temperature)
    self.weight = float(weight)
    self.exclude_self = bool(exclude_self)

  def loss(self, batch, logits, features, context, hparams, rows):
    del context, hparams, rows
    if EMBEDDING_KEY not in batch:
      raise ValueError(f'{type(self).__name__} needs the per-example field '
                       f"'{EMBEDDING_KEY}' in the client dataset; it has {sorted(batch)}")
    contrast = contrastive_tf.k_similarity_loss(
        features, batch[EMBEDDING_KEY], self.k, self.temperature, self.exclude_self)
    return losses.cross_entropy(batch['y'], logits) + self.weight * contrast
