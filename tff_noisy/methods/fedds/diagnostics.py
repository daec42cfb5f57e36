"""FedDS's record: the Dawid-Skene reliability of each client, against the truth (a
reliable annotator has a low noise rate: its r should follow 1 - noise rate)."""

from typing import Dict

from tff_noisy import diagnostics


class Reliabilities(diagnostics.Diagnostic):
  """``{client id: r_j}`` (Eq. 8's mean diagonal) and their Pearson r with 1 - the true
  noise rate (``reliability_correlation``, absent for fewer than two clients)."""

  def __init__(self, reliabilities: Dict[str, float]):
    self.reliabilities = reliabilities

  def unscored(self):
    return {'reliabilities': self.reliabilities}

  def scored(self, truth):
    entries = self.unscored()
    r = diagnostics.correlation(
        self.reliabilities, {cid: 1.0 - rate for cid, rate in truth.noise_rates.items()})
    if r is not None:
      entries['reliability_correlation'] = r
    return entries
