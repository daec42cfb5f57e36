"""LSC's record: how often the encoder's in-batch neighbours share an example's *true*
label (``extra.lsc``), next to the chance level; simulation truth, for reporting only."""

from typing import Dict, Optional

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import contrastive


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


class NeighbourPurity(diagnostics.Diagnostic):
  """The share of the K in-batch neighbours (by the encoder's embeddings) that share the
  example's true label, over one random split of each client into training batches
  (client i's split drawn from ``(seed, i)``), and the share of all other examples of
  the batch that do (the chance level)."""

  def __init__(self, embeddings: Dict[str, np.ndarray], k: int, batch_size: Optional[int],
               seed: int, encoder_id: str):
    self.embeddings = embeddings
    self.k = k
    self.batch_size = batch_size
    self.seed = seed
    self.encoder_id = encoder_id

  def scored(self, truth):
    counts = np.zeros(4, np.int64)
    for index, cid in enumerate(truth.client_ids):
      own = self.embeddings[cid]
      rng = np.random.default_rng([self.seed, index])
      counts += in_batch_purity(own, truth.true_labels[cid], self.k,
                                self.batch_size or max(len(own), 1), rng)
    same, neighbours, same_others, others = (int(c) for c in counts)
    width = next(iter(self.embeddings.values())).shape[1]
    return {'lsc': {
        'encoder': self.encoder_id, 'embedding_width': int(width),
        'neighbour_purity': same / neighbours if neighbours else None,
        'same_label_chance': same_others / others if others else None,
        'purity_batch_size': self.batch_size, 'k': self.k}}
