"""FedLN-AKD's client part: α · (1/D) Σ_d |g_d(x) − e_d| beside cross-entropy on the
clients that distil (the code's ``Distiller.train_step``: ``loss + alpha *
MeanAbsoluteError(supervision_signal, embeddings)``).

e is the representation head's output, the last D columns (D: g's width) of the model's
features (``model.akd_model``); g(x) the frozen encoder's embedding of the same input,
the per-example field ``embedding``; whether the client distils, the per-example field
``akd_distil`` (1 on a distilling client's examples, else 0). No gradient reaches g.
"""

from tff_noisy.methods import contract
from tff_noisy.ops import akd_tf

EMBEDDING_KEY = 'embedding'
DISTIL_KEY = 'akd_distil'


class EmbeddingDistillation(contract.ClientPart):
  """weight · distil · MAE(e, g) per example (added to the cross-entropy part's term)."""

  needs = contract.Needs(features=True)

  def __init__(self, weight: float):
    if weight < 0:
      raise ValueError(f'needs weight >= 0, got {weight}')
    self.weight = float(weight)

  def loss(self, batch, out, ctx):
    del ctx
    for key in (EMBEDDING_KEY, DISTIL_KEY):
      if key not in batch:
        raise ValueError(f'{type(self).__name__} needs the per-example field '
                         f"'{key}' in the client dataset; it has {sorted(batch)}")
    teacher = batch[EMBEDDING_KEY]
    student = out.features[:, -int(teacher.shape[-1]):]  # The head's D columns.
    distil = akd_tf.embedding_mae(student, teacher)
    return self.weight * batch[DISTIL_KEY] * distil
