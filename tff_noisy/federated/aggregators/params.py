"""Each aggregator's typed parameters (``fl.aggregator_params``), checked against the
clients sampled per round (n = ``fl.clients_per_round``), where a rule's limits depend on
it. TensorFlow-free: a config is checked before any factory module is imported."""

import dataclasses
from typing import ClassVar

from tff_noisy.params import described, Params, fail, require

_FIELD = 'fl.aggregator_params.'


def _require(condition: bool, name: str, message: str, value) -> None:
  require(condition, name, message, value, prefix=_FIELD)


@dataclasses.dataclass(frozen=True)
class AggregatorParams(Params):
  """An aggregator without parameters (mean, coordinate median); the base of the rest.
  ``check``'s argument is n, the clients sampled per round."""
  prefix: ClassVar[str] = _FIELD


@dataclasses.dataclass(frozen=True)
class GeometricMedianParams(AggregatorParams):
  max_iter: int = described(10, 'Weiszfeld steps at most.')
  eps: float = described(1e-5, 'Tolerance: stop once a step < eps * objective (0: never).')
  smoothing: float = described(1e-6, "RFA's nu: floor of every client's distance.")

  def check(self, clients_per_round):
    _require(self.max_iter >= 1, 'max_iter', 'an integer >= 1', self.max_iter)
    _require(self.eps >= 0, 'eps', 'a number >= 0', self.eps)  # Only a tolerance.
    _require(self.smoothing > 0, 'smoothing', 'a number > 0', self.smoothing)


@dataclasses.dataclass(frozen=True)
class GeometricMedianPerTensorParams(AggregatorParams):
  max_iter: int = described(10, 'Weiszfeld steps at most, per tensor.')
  eps: float = described(1e-5, 'Distance floor and absolute tolerance (MaskedOptim).')

  def check(self, clients_per_round):
    _require(self.max_iter >= 1, 'max_iter', 'an integer >= 1', self.max_iter)
    _require(self.eps > 0, 'eps', 'a number > 0', self.eps)  # Also the distance floor.


@dataclasses.dataclass(frozen=True)
class TrimmedMeanParams(AggregatorParams):
  beta: float = described(0.1, 'Fraction of clients trimmed at each end, in [0, 0.5).')

  def check(self, clients_per_round):
    _require(0 <= self.beta < 0.5, 'beta', 'a number in [0, 0.5)', self.beta)


@dataclasses.dataclass(frozen=True)
class KrumParams(AggregatorParams):
  f: int = described(1, 'Byzantine clients tolerated.')

  def check(self, clients_per_round):
    n, f = clients_per_round, self.f
    _require(f >= 0, 'f', 'an integer >= 0', f)
    if n - f - 2 < 1:
      fail('f', f'Krum needs n - f - 2 >= 1 with n = fl.clients_per_round = {n}: f={f} '
           f'needs n >= {f + 3}' + (f'; with n={n}, f can be at most {n - 3}' if n >= 3
                                    else '; Krum needs n >= 3'), _FIELD)


@dataclasses.dataclass(frozen=True)
class MultiKrumParams(KrumParams):
  m: int = described(2, 'Clients averaged, in [1, n - f].')

  def check(self, clients_per_round):
    super().check(clients_per_round)
    upper = clients_per_round - self.f
    _require(1 <= self.m <= upper, 'm', f'an integer in [1, n - f] = [1, {upper}] '
             f'(n = fl.clients_per_round = {clients_per_round})', self.m)
