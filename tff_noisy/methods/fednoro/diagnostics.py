"""FedNoRo's DaAgg record: the round's aggregation weights and the share that went to
truly noisy clients. (Its detection flags are scored by MaskedOptim's ``NoisyClients``:
the same detection.)"""

from typing import Dict

from tff_noisy import diagnostics


class DaAggWeights(diagnostics.Diagnostic):
  """``{client id: DaAgg weight}`` of a round (``daagg_weights``) and, against the truth,
  the weight on clients whose labels are noisy (``daagg_weight_on_noisy``) beside their
  share of the round's examples (``daagg_examples_on_noisy``)."""

  def __init__(self, weights: Dict[str, float], sizes: Dict[str, float]):
    self.weights = weights
    self.sizes = sizes

  def unscored(self):
    return {'daagg_weights': self.weights}

  def scored(self, truth):
    noisy = [cid for cid in self.weights if truth.noise_rates[cid] > 0]
    total = sum(self.sizes.values())
    return {**self.unscored(),
            'daagg_weight_on_noisy': float(sum(self.weights[c] for c in noisy)),
            'daagg_examples_on_noisy': (float(sum(self.sizes[c] for c in noisy) / total)
                                        if total else None)}
