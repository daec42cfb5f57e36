"""The noise-robust losses the papers compare against, as methods: FedAvg with another
per-example loss on every client (``ops.baseline_losses_tf``; NumPy twins in
``ops.baseline_losses``).

- ``label_smoothing``: Müller et al. 2019 (FedLN Table 1, "LS").
- ``bi_tempered``: Amid et al. 2019 (FedLN Table 1, "Bi-Temp").
- ``sce``: symmetric cross-entropy, Wang et al. 2019 (LSC's "SymCE", MaskedOptim's SCE).
- ``gce``: generalized cross-entropy, Zhang & Sabuncu 2018 (MaskedOptim's GCE).

Each works with every aggregator and client runtime, TFLite included.
"""

import dataclasses

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require


@dataclasses.dataclass(frozen=True)
class LabelSmoothingParams(Params):
  """Label smoothing (Müller et al. 2019; FedLN Table 1's LS)."""
  smoothing: float = described(0.1, 's: targets (1 - s)·onehot + s/C (FedLN does not state its s).')

  def check(self, rounds):
    require(0 <= self.smoothing < 1, 'smoothing', 'a number in [0, 1)', self.smoothing)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class BiTemperedParams(Params):
  """Bi-tempered logistic loss (Amid et al. 2019; FedLN Table 1's Bi-Temp). FedLN does
  not state its temperatures; the defaults are a mild pair from Amid et al.'s range."""
  t1: float = described(0.8, "Temperature of the loss' log, in (0, 1] (1: the log's own).")
  t2: float = described(1.2, 'Temperature of the tempered softmax, >= 1 (heavier tail above 1).')
  smoothing: float = described(0.0, "Amid et al.'s code: (1 - C/(C-1)·s)·onehot + s/(C-1).")
  num_iters: int = described(5, "Fixed-point iterations of the softmax's normaliser.")

  def check(self, rounds):
    require(0 < self.t1 <= 1, 't1', 'a number in (0, 1]', self.t1)
    require(self.t2 >= 1, 't2', 'a number >= 1', self.t2)
    require(0 <= self.smoothing < 1, 'smoothing', 'a number in [0, 1)', self.smoothing)
    require(self.num_iters >= 1, 'num_iters', 'an integer >= 1', self.num_iters)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class SymmetricCEParams(Params):
  """Symmetric cross-entropy (Wang et al. 2019; LSC's and MaskedOptim's SCE baseline)."""
  alpha: float = described(0.1, "Weight of cross-entropy (Wang et al.'s CIFAR-10 value).")
  beta: float = described(1.0, "Weight of reverse cross-entropy (Wang et al.'s CIFAR-10 value).")
  log_zero: float = described(-4.0, 'A: log 0 in the reverse cross-entropy (Wang et al.).')

  def check(self, rounds):
    require(self.alpha >= 0, 'alpha', 'a number >= 0', self.alpha)
    require(self.beta >= 0, 'beta', 'a number >= 0', self.beta)
    require(self.alpha + self.beta > 0, 'alpha', 'alpha + beta > 0', self.alpha)
    require(self.log_zero < 0, 'log_zero', 'a number < 0', self.log_zero)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class GCEParams(Params):
  """Generalized cross-entropy (Zhang & Sabuncu 2018; MaskedOptim's GCE baseline)."""
  q: float = described(0.7, '(1 - p_y^q)/q: q -> 0 is cross-entropy, q = 1 MAE (their default '
                       '0.7).')

  def check(self, rounds):
    require(0 < self.q <= 1, 'q', 'a number in (0, 1]', self.q)
    super().check(rounds)


_ALGORITHM = 'tff_noisy.methods.robust_losses.algorithm:'
SPECS = {
    'label_smoothing': MethodSpec('Label smoothing (baseline; Müller et al. 2019)',
                                  LabelSmoothingParams, _ALGORITHM + 'label_smoothing',
                                  display='Label smoothing'),
    'bi_tempered': MethodSpec('Bi-tempered logistic loss (baseline; Amid et al. 2019)',
                              BiTemperedParams, _ALGORITHM + 'bi_tempered',
                              display='Bi-tempered loss'),
    'sce': MethodSpec('Symmetric cross-entropy (baseline; Wang et al. 2019)',
                      SymmetricCEParams, _ALGORITHM + 'symmetric_ce', display='SCE'),
    'gce': MethodSpec('Generalized cross-entropy (baseline; Zhang & Sabuncu 2018)',
                      GCEParams, _ALGORITHM + 'generalized_ce', display='GCE'),
}
