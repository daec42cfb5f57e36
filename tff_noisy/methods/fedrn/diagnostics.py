"""FedRN's record: a round's clean sets and neighbours against the simulation's truth."""

from typing import Dict, List

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import dividemix


class Selection(diagnostics.Diagnostic):
  """The clean sets of the round's clients that selected (``own``: w > τ under the
  client's own last local model, what its neighbours' heads are fine-tuned on;
  ``selected``: w̄ > τ of the ensemble, what it trains on; {client id: bool [n]}), their
  ``neighbours`` ({client id: [client ids]}), the ``candidates`` (every client with a local
  model) and the round's clients without one (``untrained``: they train on everything).
  ``fedrn_selection`` holds, over all their examples, each set's size and its precision
  and recall for the clean labels (observed = true; ``ops.dividemix.selection_report``),
  and the mean true noise rate of the chosen neighbours and of the candidates."""

  def __init__(self, own: Dict[str, np.ndarray], selected: Dict[str, np.ndarray],
               neighbours: Dict[str, List[str]], candidates: List[str], untrained: List[str]):
    self.own = own
    self.selected = selected
    self.neighbours = neighbours
    self.candidates = list(candidates)
    self.untrained = list(untrained)

  def _counts(self) -> dict:
    return {'clients': len(self.selected), 'untrained_clients': len(self.untrained),
            'selected_own': int(sum(m.sum() for m in self.own.values())),
            'selected': int(sum(m.sum() for m in self.selected.values())),
            'neighbours': {cid: list(n) for cid, n in self.neighbours.items()}}

  def unscored(self):
    return {'fedrn_selection': self._counts()}

  def scored(self, truth):
    entry = self._counts()
    ids = list(self.selected)
    if ids:
      true = np.concatenate([truth.true_labels[c] for c in ids])
      observed = np.concatenate([truth.observed_labels[c] for c in ids])
      for suffix, masks in (('_own', self.own), ('', self.selected)):
        report = dividemix.selection_report(np.concatenate([masks[c] for c in ids]), true,
                                            observed)
        entry.update({f'precision{suffix}': report['precision'],
                      f'recall{suffix}': report['recall']})
    chosen = [n for c in ids for n in self.neighbours[c]]
    entry['neighbour_noise_rate'] = (float(np.mean([truth.noise_rates[n] for n in chosen]))
                                     if chosen else None)
    entry['candidate_noise_rate'] = (float(np.mean([truth.noise_rates[n] for n in
                                                    self.candidates]))
                                     if self.candidates else None)
    return {'fedrn_selection': entry}
