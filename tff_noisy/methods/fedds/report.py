"""FedDS's section of ``tff-noisy report``: its reliabilities and the weights they gave,
per client, against the true noise rates (drawn with the other per-client estimates)."""

import numpy as np

from tff_noisy import reporting


class ReliabilitySection(reporting.Section):
  round_keys = ('reliabilities', 'reliability_correlation', 'fedds_weights')

  def estimates(self, results):
    records = results.get('rounds', [])
    found = []
    with_reliabilities = [r for r in records if r.get('reliabilities')]
    if with_reliabilities:
      recorded = [r['reliability_correlation'] for r in with_reliabilities
                  if r.get('reliability_correlation') is not None]
      found.append(reporting.Estimate(
          'reliabilities', 'reliability', f'mean over the {len(with_reliabilities)} rounds '
          'that estimated it', reporting.client_values(with_reliabilities, 'reliabilities'),
          ("the run's own r with 1 - noise rate (mean over rounds)",
           float(np.mean(recorded))) if recorded else None))
    return found + reporting.weights_estimate(
        [r['fedds_weights'] for r in records if r.get('fedds_weights')])


SECTIONS = (ReliabilitySection(),)
