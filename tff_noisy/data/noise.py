"""Seeded label noise, applied per client.

Every synthetic model is a row-stochastic transition matrix T (row = true class,
column = observed class, T[c, k] = P(observed k | true c)) chosen per client, from which
that client's labels are drawn. Clients draw from independent streams keyed by
(seed, client index), so a client's noise does not depend on how many clients there are.

Models (``noise.name``):

* ``symmetric`` / ``pairflip`` / ``cifar10_asym``: one fixed T at ``noise.rate`` on a
  fraction ``noisy_fraction`` of clients; labels flip independently per sample.
* ``fedln``: FedLN's (n_l, n_s) generator (docs/papers/fedln.md, ambiguity 10) and
  ``cleanlab``: cleanlab's trace/sparsity matrix flipped with exact counts (FedEFC); each
  on a fraction ``noisy_fraction`` of clients, with one matrix per client or, with
  ``shared_matrix``, one for all.
* ``fedcorr``: each client noisy w.p. rho with rate U(tau, 1) (FedCorr; docs/papers/lsc.md,
  ambiguity 12).
* ``linear`` / ``choice``: per-client rates, linearly spaced or drawn from a list, with
  flip kind ``noise.flip`` (MaskedOptim, FedDS).
* ``mixed``: ``linear``'s rates with the flip kind alternating symmetric / pair-flip over
  the clients (FNBench's "mixed"; MaskedOptim Table 2's Mixed column).
* ``real``: a dataset's human noisy-label column (CIFAR-N).
"""

import dataclasses
from typing import ClassVar, Optional

import numpy as np

from tff_noisy import registry
from tff_noisy.config import NoiseConfig
from tff_noisy.data import params as data_params
from tff_noisy.data.partition import apportion, generator
from tff_noisy.errors import ConfigError
from tff_noisy.params import fail, is_number, Params


def _check_flip(params: Params, context: data_params.Context) -> None:
  data_params.one_of(params, 'flip', tuple(FLIPS))
  if params.flip == 'cifar10_asym':
    data_params.needs_ten_classes(params, 'flip', context)


@dataclasses.dataclass(frozen=True)
class CleanParams(Params):
  """Reads no field; the base of every noise model's parameters."""
  prefix: ClassVar[str] = 'noise.'


@dataclasses.dataclass(frozen=True)
class NoNoiseParams(CleanParams):
  """``none``: noise switched off, whatever the other noise fields say (a grid's clean
  column on a noisy config keeps them)."""
  ignores_other_fields: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class FlipParams(CleanParams):
  """``symmetric`` / ``pairflip``: one fixed flip rate on a fraction of the clients."""
  noisy_fraction: float
  rate: float

  def check(self, context: data_params.Context) -> None:
    data_params.in_unit(self, 'rate', 'noisy_fraction')
    super().check(context)


@dataclasses.dataclass(frozen=True)
class Cifar10AsymParams(FlipParams):
  """``cifar10_asym``: CIFAR-10's class pairs, so a 10-class dataset."""

  def check(self, context: data_params.Context) -> None:
    data_params.needs_ten_classes(self, 'name', context)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class GeneratedParams(CleanParams):
  """``fedln``: a generated (level, sparsity) matrix on a fraction of the clients."""
  noisy_fraction: float
  level: float
  sparsity: float
  shared_matrix: bool

  def check(self, context: data_params.Context) -> None:
    data_params.in_unit(self, 'level', 'sparsity', 'noisy_fraction')
    super().check(context)


@dataclasses.dataclass(frozen=True)
class CleanlabParams(GeneratedParams):
  """``cleanlab``: cleanlab's generator, with its own seed and learnability check."""
  matrix_seed: Optional[int]
  valid_matrix: bool

  def check(self, context: data_params.Context) -> None:
    if self.matrix_seed is not None:
      data_params.at_least(self, 'matrix_seed', 0)
    super().check(context)
    if self.valid_matrix and not context.num_classes * (1.0 - self.level) > 1.0:
      fail('level', f'a learnable matrix needs trace C(1 - level) > 1; got level '
                    f'{self.level} with {context.num_classes} classes', self.prefix)


@dataclasses.dataclass(frozen=True)
class FedCorrNoiseParams(CleanParams):
  """``fedcorr``: a client is noisy w.p. rho, with a rate drawn from U(tau, 1)."""
  rho: float
  tau: float

  def check(self, context: data_params.Context) -> None:
    data_params.in_unit(self, 'rho', 'tau')
    super().check(context)


@dataclasses.dataclass(frozen=True)
class MixedParams(CleanParams):
  """``mixed``: per-client rates linearly spaced in [min_rate, max_rate]."""
  min_rate: float
  max_rate: float

  def check(self, context: data_params.Context) -> None:
    data_params.in_unit(self, 'min_rate', 'max_rate')
    if self.min_rate > self.max_rate:
      fail('min_rate', f'must be <= noise.max_rate={self.max_rate}, got {self.min_rate}',
           self.prefix)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class LinearParams(MixedParams):
  """``linear``: ``mixed``'s rates with one flip kind for every client."""
  flip: str

  def check(self, context: data_params.Context) -> None:
    super().check(context)
    _check_flip(self, context)


@dataclasses.dataclass(frozen=True)
class ChoiceParams(CleanParams):
  """``choice``: per-client rates drawn from a list, with one flip kind."""
  rates: Optional[list]
  balanced: bool
  flip: str

  def check(self, context: data_params.Context) -> None:
    if not self.rates:
      fail('rates', "noise 'choice' needs a non-empty list, e.g. [0.1, 0.2, ..., 1.0]",
           self.prefix)
    for i, rate in enumerate(self.rates):
      if not (is_number(rate) and 0.0 <= rate <= 1.0):
        fail(f'rates[{i}]', f'must be in [0, 1], got {rate!r}', self.prefix)
    _check_flip(self, context)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class RealParams(CleanParams):
  """``real``: one of the dataset's human noisy-label columns."""
  real_labels: Optional[str]

  def check(self, context: data_params.Context) -> None:
    if not context.noisy_label_columns:
      fail('name', f"'real' needs a dataset with human noisy labels "
                   f"({', '.join(context.noisy_label_datasets)}); got {context.dataset}",
           self.prefix)
    data_params.one_of(self, 'real_labels', context.noisy_label_columns)
    super().check(context)


# noise.name -> its summary and its CleanParams class (the noise.<field>s it reads
# besides name); ``client_matrices`` and ``apply_noise`` build each from the name.
NOISE_MODELS = registry.Registry('noise.name', 'noise model', {
    'none': registry.Entry('Clean labels', NoNoiseParams),
    'symmetric': registry.Entry('Flip w.p. rate to a uniformly random other class',
                                FlipParams),
    'pairflip': registry.Entry('Flip w.p. rate from class c to c - 1', FlipParams),
    'cifar10_asym': registry.Entry('CIFAR-10 flips w.p. rate: truck -> automobile, bird -> '
                                   'airplane, deer -> horse, cat -> dog', Cifar10AsymParams),
    'fedln': registry.Entry("FedLN's (n_l, n_s) generator: flip w.p. level to other classes; "
                            'sparsity 0: all of them, 1: one per class', GeneratedParams),
    'cleanlab': registry.Entry("cleanlab's trace/sparsity matrix, flipped with exact counts "
                               '(FedEFC)', CleanlabParams),
    'fedcorr': registry.Entry("FedCorr's: a client is noisy w.p. rho, then relabels w.p. "
                              'mu ~ U(tau, 1) uniformly over all classes', FedCorrNoiseParams),
    'linear': registry.Entry('Per-client rates linearly spaced in [min_rate, max_rate] '
                             '(MaskedOptim)', LinearParams),
    'choice': registry.Entry('Per-client rates drawn from a list (FedDS)', ChoiceParams),
    'mixed': registry.Entry('Per-client rates linearly spaced in [min_rate, max_rate], flips '
                            'alternating symmetric / pairflip over clients (FNBench, '
                            'MaskedOptim)', MixedParams),
    'real': registry.Entry("A dataset's human noisy-label column (CIFAR-N)", RealParams),
})

_PLAN, _MATRIX, _SAMPLE = 2, 3, 4  # Random streams (see partition.generator).
# truck -> automobile, bird -> airplane, deer -> horse, cat -> dog.
CIFAR10_ASYM_PAIRS = {9: 1, 2: 0, 4: 7, 3: 5}


def symmetric_matrix(num_classes: int, rate: float) -> np.ndarray:
  """T = (1 - r) I + r/(C - 1) (11ᵀ - I): flip w.p. r to a uniformly random other class.

  Symmetric noise of FedDS and MaskedOptim (FedDS §5.1, MaskedOptim §5.1).
  """
  matrix = np.full((num_classes, num_classes), rate / (num_classes - 1))
  np.fill_diagonal(matrix, 1.0 - rate)
  return matrix


def pairflip_matrix(num_classes: int, rate: float) -> np.ndarray:
  """T[c, c] = 1 - r, T[c, (c - 1) mod C] = r: pair flip y -> y - 1 (MaskedOptim §3.2)."""
  eye = np.eye(num_classes)
  return (1.0 - rate) * eye + rate * np.roll(eye, -1, axis=1)


def cifar10_asym_matrix(num_classes: int, rate: float) -> np.ndarray:
  """CIFAR-10 asymmetric flips w.p. r: 9->1, 2->0, 4->7, 3->5, others clean (FedDS §5.4.1)."""
  if num_classes != 10:
    raise ValueError(f'cifar10_asym needs 10 classes, got {num_classes}')
  matrix = np.eye(10)
  for source, target in CIFAR10_ASYM_PAIRS.items():
    matrix[source, source] = 1.0 - rate
    matrix[source, target] = rate
  return matrix


FLIPS = {
    'symmetric': symmetric_matrix,
    'pairflip': pairflip_matrix,
    'cifar10_asym': cifar10_asym_matrix,
}


def fedln_matrix(num_classes: int, level: float, sparsity: float,
                 rng: np.random.Generator) -> np.ndarray:
  """FedLN's noise (docs/papers/fedln.md, ambiguity 10): each class c keeps its label w.p.
  1 - n_l, else moves to one of t = max(⌈(C - 1)(1 - n_s)⌉, 1) random targets ≠ c
  (n_l / t each).

  n_s = 0 spreads flips over all other classes; n_s = 1 sends each class to one target.
  """
  # Rounded so that e.g. 9 * (1 - 0.9) = 0.9000000000000008 does not ceil to 2.
  targets = max(int(np.ceil(round((num_classes - 1) * (1.0 - sparsity), 9))), 1)
  matrix = (1.0 - level) * np.eye(num_classes)
  for c in range(num_classes):
    others = np.delete(np.arange(num_classes), c)
    matrix[c, rng.choice(others, size=targets, replace=False)] += level / targets
  return matrix


def cleanlab_matrix(num_classes: int, level: float, sparsity: float, seed: int,
                    valid: bool = False) -> np.ndarray:
  """Confident Learning's generator (FedEFC §2.2): cleanlab's
  ``generate_noise_matrix_from_trace`` with trace C(1 - n_l), a fraction n_s of the
  off-diagonal entries zero and cleanlab's own ``seed``; ``valid`` runs its learnability
  check (``valid_noise_matrix``: p(true c | noisy c) > p(true c) for every c, FedEFC
  §2.2 at seed 42), which redraws until the matrix passes.

  cleanlab returns P[observed, true] (columns sum to 1); this returns its transpose.
  """
  from cleanlab.benchmarking import noise_generation  # pylint: disable=g-import-not-at-top
  state = np.random.get_state()  # cleanlab seeds numpy's global generator.
  try:
    matrix = noise_generation.generate_noise_matrix_from_trace(
        num_classes, num_classes * (1.0 - level), min_trace_prob=0.0,
        frac_zero_noise_rates=sparsity, valid_noise_matrix=valid, seed=seed,
        py=np.full(num_classes, 1.0 / num_classes) if valid else None)
  finally:
    np.random.set_state(state)
  if matrix is None:  # cleanlab gave up after its 10,000 draws.
    raise ConfigError(f'noise.valid_matrix: cleanlab drew no learnable matrix at level '
                      f'{level}, sparsity {sparsity}, seed {seed}; lower noise.level or '
                      'set noise.valid_matrix: false')
  return matrix.T


def sample_labels(labels: np.ndarray, matrix: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
  """Draws each observed label independently from row T[y] of its true label y."""
  out = labels.copy()
  for c in np.unique(labels):
    members = np.flatnonzero(labels == c)
    out[members] = rng.choice(len(matrix), size=len(members), p=matrix[c])
  return out


def assign_exact(labels: np.ndarray, matrix: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
  """Relabels exactly round(N_c T[c, k]) random samples of class c as k.

  Counts use largest-remainder rounding so that they sum to N_c. cleanlab's
  ``generate_noisy_labels`` does the same with floored counts, but it draws from numpy's
  global generator and fails on a client that lacks some classes.
  """
  out = labels.copy()
  for c in np.unique(labels):
    members = rng.permutation(np.flatnonzero(labels == c))
    out[members] = np.repeat(np.arange(len(matrix)), apportion(len(members), matrix[c]))
  return out


def transition_matrix(y_true: np.ndarray, y_obs: np.ndarray,
                      num_classes: int) -> np.ndarray:
  """Empirical T[c, k] = #(true c, observed k) / #(true c); rows of absent classes = I.

  The transpose of FedEFC's column-stochastic Q (Q[i, j] = P(observed i | true j)).
  """
  counts = np.bincount(np.asarray(y_true) * num_classes + np.asarray(y_obs),
                       minlength=num_classes**2).reshape(num_classes, num_classes)
  totals = counts.sum(axis=1, keepdims=True)
  return np.where(totals > 0, counts / np.maximum(totals, 1), np.eye(num_classes))


def client_rates(num_clients: int, num_classes: int, config: NoiseConfig,
                 rng: np.random.Generator) -> np.ndarray:
  """Nominal flip probability per client for ``linear``, ``mixed``, ``choice`` and
  ``fedcorr``.

  linear and mixed (MaskedOptim §5.1, FedRN lineage): r_m = min_rate + m (max_rate - min_rate)
  / (M - 1), both ends included (MaskedOptim divides by M and never reaches max_rate).
  choice (FedDS §5.1, rates {0.1, ..., 1.0}): r_m from ``rates``; balanced gives each
  of the L rates to ⌊M/L⌋ or ⌈M/L⌉ clients, otherwise i.i.d. draws.
  fedcorr (LSC Appendix A.8): client m is noisy w.p. rho (Bernoulli) with μ_m ~ U(tau, 1); each
  of its samples is relabelled w.p. μ_m uniformly over all C classes, i.e. flipped to
  another class w.p. r_m = μ_m (C - 1)/C.
  """
  if config.name in ('linear', 'mixed'):
    return np.linspace(config.min_rate, config.max_rate, num_clients)
  if config.name == 'choice':
    rates = np.asarray(config.rates, np.float64)
    if not config.balanced:
      return rng.choice(rates, size=num_clients)
    whole, extra = divmod(num_clients, len(rates))
    pool = np.concatenate([np.repeat(rates, whole),
                           rng.choice(rates, size=extra, replace=False)])
    return rng.permutation(pool)
  noisy = rng.random(num_clients) < config.rho
  mu = rng.uniform(config.tau, 1.0, num_clients)
  return np.where(noisy, mu * (num_classes - 1) / num_classes, 0.0)


# The noise models whose every client has its own rate and flip kind.
PER_CLIENT_RATES = ('linear', 'choice', 'fedcorr', 'mixed')
MIXED_FLIPS = ('symmetric', 'pairflip')  # ``mixed``: client m flips as MIXED_FLIPS[m % 2].


def client_flip_kinds(num_clients: int, config: NoiseConfig) -> Optional[list]:
  """Each client's flip kind (a ``FLIPS`` name) under a ``PER_CLIENT_RATES`` model, else
  None: ``mixed`` alternates ``MIXED_FLIPS``, ``fedcorr`` relabels uniformly (symmetric),
  ``linear`` and ``choice`` use ``noise.flip`` for every client."""
  if config.name not in PER_CLIENT_RATES:
    return None
  if config.name == 'mixed':
    return [MIXED_FLIPS[m % len(MIXED_FLIPS)] for m in range(num_clients)]
  return ['symmetric' if config.name == 'fedcorr' else config.flip] * num_clients


def client_matrices(num_clients: int, num_classes: int, config: NoiseConfig,
                    seed: int) -> list:
  """Each client's transition matrix, or None for a clean client."""
  rng = generator(seed, _PLAN)
  if config.name == 'none':
    return [None] * num_clients
  if config.name in PER_CLIENT_RATES:
    rates = client_rates(num_clients, num_classes, config, rng)
    return [FLIPS[flip](num_classes, r)
            for flip, r in zip(client_flip_kinds(num_clients, config), rates)]
  # A fixed noise process on round(F·M) random clients.
  noisy = rng.permutation(num_clients) < int(config.noisy_fraction * num_clients + 0.5)
  if config.name in FLIPS:
    matrix = FLIPS[config.name](num_classes, config.rate)
    return [matrix if n else None for n in noisy]
  if config.shared_matrix:
    matrix = _generated_matrix(num_classes, config, seed, client=None)
    return [matrix if n else None for n in noisy]
  return [_generated_matrix(num_classes, config, seed, client=m) if n else None
          for m, n in enumerate(noisy)]


def _generated_matrix(num_classes: int, config: NoiseConfig, seed: int,
                      client: Optional[int]) -> np.ndarray:
  """The ``fedln`` or ``cleanlab`` matrix of one client (None: the shared one)."""
  streams = (seed, _MATRIX) if client is None else (seed, _MATRIX, client)
  if config.name == 'fedln':
    return fedln_matrix(num_classes, config.level, config.sparsity, generator(*streams))
  if config.matrix_seed is not None:
    cleanlab_seed = config.matrix_seed + (client or 0)
  else:
    cleanlab_seed = int(generator(*streams).integers(2**31))
  return cleanlab_matrix(num_classes, config.level, config.sparsity, cleanlab_seed,
                         config.valid_matrix)


def apply_noise(client_labels: list, num_classes: int, config: NoiseConfig, seed: int,
                real_labels: Optional[list] = None) -> list:
  """Returns each client's observed labels (int64), given its true labels.

  ``real_labels`` (``real`` only): each client's labels from the dataset's noisy column.
  """
  NOISE_MODELS.lookup(config.name)
  client_labels = [np.asarray(y, np.int64) for y in client_labels]
  for y in client_labels:
    if y.size and (y.min() < 0 or y.max() >= num_classes):
      raise ValueError(f'labels outside [0, {num_classes})')
  if config.name == 'real':
    if real_labels is None or [len(r) for r in real_labels] != [len(y) for y in client_labels]:
      raise ValueError("noise 'real' needs real_labels: one array per client, each as "
                       'long as its true labels')
    return [np.array(r, np.int64) for r in real_labels]
  sample = assign_exact if config.name == 'cleanlab' else sample_labels
  matrices = client_matrices(len(client_labels), num_classes, config, seed)
  return [y.copy() if matrix is None else sample(y, matrix, generator(seed, _SAMPLE, m))
          for m, (y, matrix) in enumerate(zip(client_labels, matrices))]
