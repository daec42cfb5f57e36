"""What every method folder builds on: its registry entry (``MethodSpec``) and the
parameter groups several methods share (FedProx's proximal term). TensorFlow-free."""

import dataclasses

from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class MethodSpec:
  """A method's registry entry (``methods.METHODS``), what its folder's ``SPECS`` holds."""
  params: type  # Its ``Params`` subclass.
  # Its ``methods.base.Method``: 'module:Class', imported when it is built (TensorFlow),
  # or the class itself (a method registered from outside this package).
  algorithm: object
  summary: str
  needs_public_split: bool = False
  # Why its clients cannot train on devices (fl.client_runtime: tflite); '' if they can.
  off_device: str = ''
  # How its diagnostics appear in ``tff-noisy report`` (``reporting.Section`` objects).
  report_sections: tuple = ()


@dataclasses.dataclass(frozen=True)
class ProximalParams(Params):
  mu: float = described(0.01, 'FedProx proximal strength (Li et al. 2020, Eq. 2).')

  def check(self, rounds):
    require(self.mu > 0, 'mu', 'a number > 0 (FedProx)', self.mu)
    super().check(rounds)
