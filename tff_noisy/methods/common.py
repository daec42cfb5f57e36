"""What every method folder builds on: its registry entry (``MethodSpec``), the name figures
give it (``display_name``) and the parameter groups several methods share (FedProx's
proximal term). TensorFlow-free."""

import dataclasses

from tff_noisy import registry
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class MethodSpec(registry.Entry):
  """A method's registry entry (``methods.METHODS``), what its folder's ``SPECS`` holds:
  its summary, its ``Params`` subclass and as the target its ``build(params, setup)``,
  which returns its ``methods.recipe.Recipe`` ('module:function', imported when it is
  built, or the function itself for a method registered from outside this package)."""
  needs_public_split: bool = False
  # Whether it reads the public split's labels (``FederatedData.y_public``), assuming the
  # server's public set is clean and labelled (FOCUS); needs_public_split too.
  needs_public_labels: bool = False
  # Why its clients cannot train on devices (fl.client_runtime: tflite); '' if they can.
  off_device: str = ''
  # How its diagnostics appear in ``tff-noisy report`` (``reporting.Section`` objects).
  report_sections: tuple = ()
  # How figures name it (FedAvg, FedEFC, ...); its registry name if ''.
  display: str = ''

  def listing(self) -> str:
    needs = ' (needs data.public_fraction > 0, its labels clean)' if (
        self.needs_public_labels) else ' (needs data.public_fraction > 0)'
    return self.summary + (needs if self.needs_public_split else '')


def display_name(name: str) -> str:
  """How figures name method ``name``: its registry entry's ``display``, else the name."""
  from tff_noisy.methods import METHODS  # pylint: disable=g-import-not-at-top  (imports this)
  return (METHODS[name].display if name in METHODS else '') or name


@dataclasses.dataclass(frozen=True)
class ProximalParams(Params):
  mu: float = described(0.01, 'FedProx proximal strength (Li et al. 2020, Eq. 2).')

  def check(self, rounds):
    require(self.mu > 0, 'mu', 'a number > 0 (FedProx)', self.mu)
    super().check(rounds)
