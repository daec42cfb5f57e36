"""Seeded partitions of a labelled training set over clients.

Every partitioner maps (labels, PartitionConfig, numpy Generator) to one index array
per client; :func:`partition` seeds it, checks the result covers every sample exactly
once and returns sorted int64 arrays. ``PARTITIONS`` gives each as its entry's target,
with the class of the ``partition.<field>``s it reads.
"""

import dataclasses
import inspect
from typing import Callable, ClassVar

import numpy as np

from tff_noisy import registry
from tff_noisy.config import ConfigError, PartitionConfig
from tff_noisy.data import params as data_params
from tff_noisy.params import fail, Params

MAX_DRAWS = 1000  # dirichlet / fedcorr: redraws allowed to reach partition.min_size.
_STREAM = 1  # Random stream of the partition (see `generator`).


def generator(seed: int, *key: int) -> np.random.Generator:
  """An independent random stream per (seed, key), e.g. (seed, stream, client).

  Uses SeedSequence spawn keys: plain entropy lists would collide, since [s, k] and
  [s, k, 0] seed the same stream.
  """
  return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def apportion(total: int, weights: np.ndarray) -> np.ndarray:
  """Splits an integer total in proportion to weights (largest-remainder method)."""
  weights = np.asarray(weights, np.float64)
  quota = total * weights / weights.sum()
  counts = np.floor(quota).astype(np.int64)
  extra = np.argsort(counts - quota, kind='stable')[:total - counts.sum()]
  counts[extra] += 1
  return counts


def iid(labels: np.ndarray, config: PartitionConfig,
        rng: np.random.Generator) -> list:
  """Random equal split: sizes differ by at most one."""
  return np.array_split(rng.permutation(len(labels)), config.num_clients)


def iid_sigma(labels: np.ndarray, config: PartitionConfig,
              rng: np.random.Generator) -> list:
  """Random split with varying sizes (FedLN's σ): N_m ∝ s_m = max(1 + σ z_m, 0.1).

  z_m ~ N(0, 1); every client gets one sample plus its share of the other N - M
  (docs/papers/fedln.md, ambiguity 11).
  """
  scale = np.maximum(1.0 + config.sigma * rng.standard_normal(config.num_clients), 0.1)
  sizes = 1 + apportion(len(labels) - config.num_clients, scale)
  return np.split(rng.permutation(len(labels)), np.cumsum(sizes)[:-1])


def dirichlet(labels: np.ndarray, config: PartitionConfig,
              rng: np.random.Generator) -> list:
  """Label skew of Hsu et al. as in FedDS's code (docs/papers/fedds.md, ambiguity 11).

  For each class, proportions p ~ Dir(α·1_M); clients that already hold >= N/M samples
  get p_m = 0 (renormalised); the class's shuffled samples are cut at the cumulative
  proportions. Redrawn until every client has >= min_size samples.
  """
  num_clients = config.num_clients
  classes = [np.flatnonzero(labels == c) for c in np.unique(labels)]
  cap = len(labels) / num_clients

  def draw(rng):
    owner = np.empty(len(labels), np.int64)
    sizes = np.zeros(num_clients)
    for members in classes:
      members = rng.permutation(members)
      p = rng.dirichlet(np.full(num_clients, config.alpha)) * (sizes < cap)
      if p.sum() == 0:  # All of the class's mass fell on full clients: a failed draw.
        return None
      cuts = (np.cumsum(p / p.sum()) * len(members)).astype(np.int64)[:-1]
      for client, chunk in enumerate(np.split(members, cuts)):
        owner[chunk] = client
        sizes[client] += len(chunk)
    return owner

  return _redraw_until_min_size(draw, config, rng)


def shards(labels: np.ndarray, config: PartitionConfig,
           rng: np.random.Generator) -> list:
  """Shards (McMahan et al.): sort by label, cut M·S shards, give each client S at random."""
  num_shards = config.num_clients * config.shards_per_client
  if num_shards > len(labels):
    raise ConfigError(
        f'partition.shards_per_client: {config.num_clients} clients x '
        f'{config.shards_per_client} shards need {num_shards} samples, have {len(labels)}')
  order = rng.permutation(len(labels))
  order = order[np.argsort(labels[order], kind='stable')]
  pieces = np.array_split(order, num_shards)
  owned = rng.permutation(num_shards).reshape(config.num_clients, -1)
  return [np.concatenate([pieces[s] for s in row]) for row in owned]


def fedcorr(labels: np.ndarray, config: PartitionConfig,
            rng: np.random.Generator) -> list:
  """FedCorr's class-presence split (FedEFC §2.1; LSC Appendix A.8).

  Φ_mc ~ Bernoulli(class_prob); a client row with no class is redrawn, and a class held
  by no client is given to one random client. For each class c, q_c ~ Dir(α) over the
  clients holding c, and each sample of c goes to a client drawn from q_c. Redrawn until
  every client has >= min_size samples.
  """
  num_clients = config.num_clients
  classes = [np.flatnonzero(labels == c) for c in np.unique(labels)]

  def draw(rng):
    held = rng.random((num_clients, len(classes))) < config.class_prob
    while not held.any(axis=1).all():
      empty = ~held.any(axis=1)
      held[empty] = rng.random((empty.sum(), len(classes))) < config.class_prob
    for c in np.flatnonzero(~held.any(axis=0)):
      held[rng.integers(num_clients), c] = True
    owner = np.empty(len(labels), np.int64)
    for c, members in enumerate(classes):
      holders = np.flatnonzero(held[:, c])
      q = rng.dirichlet(np.full(len(holders), config.alpha))
      owner[members] = holders[rng.choice(len(holders), size=len(members), p=q)]
    return owner

  return _redraw_until_min_size(draw, config, rng)


def _redraw_until_min_size(draw: Callable, config: PartitionConfig, rng) -> list:
  """Calls draw(rng) -> owner[N] (or None) until every client has >= min_size samples."""
  for _ in range(MAX_DRAWS):
    owner = draw(rng)
    if owner is None:
      continue
    sizes = np.bincount(owner, minlength=config.num_clients)
    if sizes.min() >= config.min_size:
      return np.split(np.argsort(owner, kind='stable'), np.cumsum(sizes)[:-1])
  raise ConfigError(
      f"partition.min_size: '{config.name}' gave some client fewer than "
      f'{config.min_size} samples in {MAX_DRAWS} draws (alpha={config.alpha}, '
      f'{config.num_clients} clients); lower min_size, raise alpha or use fewer clients')


@dataclasses.dataclass(frozen=True)
class PartitionParams(Params):
  """``iid``: the number of clients; the base of every partition's parameters."""
  prefix: ClassVar[str] = 'partition.'
  num_clients: int

  def check(self, context: data_params.Context) -> None:
    data_params.at_least(self, 'num_clients', 1)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class SizeSpreadParams(PartitionParams):
  """``iid_sigma``: client sizes with relative spread sigma."""
  sigma: float

  def check(self, context: data_params.Context) -> None:
    data_params.at_least(self, 'sigma', 0)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class DirichletParams(PartitionParams):
  """``dirichlet``: Dirichlet(alpha) class shares, redrawn until each client has
  ``min_size`` examples."""
  alpha: float
  min_size: int

  def check(self, context: data_params.Context) -> None:
    if not self.alpha > 0:
      fail('alpha', f'must be > 0, got {self.alpha}', self.prefix)
    data_params.at_least(self, 'min_size', 1)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class FedCorrPartitionParams(DirichletParams):
  """``fedcorr``: ``dirichlet`` over the clients that hold a class (w.p. class_prob)."""
  class_prob: float

  def check(self, context: data_params.Context) -> None:
    if not 0.0 < self.class_prob <= 1.0:
      fail('class_prob', f'must be in (0, 1], got {self.class_prob}', self.prefix)
    super().check(context)


@dataclasses.dataclass(frozen=True)
class ShardsParams(PartitionParams):
  """``shards``: label-sorted shards, ``shards_per_client`` to each client."""
  shards_per_client: int

  def check(self, context: data_params.Context) -> None:
    data_params.at_least(self, 'shards_per_client', 1)
    super().check(context)


def _entry(split: Callable, params: type) -> registry.Entry:
  """The entry of ``split`` ((labels, config, rng) -> each client's sample indices), its
  summary the first line of its docstring; ``params``: its PartitionParams class, the
  partition.<field>s it reads."""
  return registry.Entry(inspect.getdoc(split).splitlines()[0], params, split)


PARTITIONS = registry.Registry('partition.name', 'partition', {
    'iid': _entry(iid, PartitionParams),
    'iid_sigma': _entry(iid_sigma, SizeSpreadParams),
    'dirichlet': _entry(dirichlet, DirichletParams),
    'shards': _entry(shards, ShardsParams),
    'fedcorr': _entry(fedcorr, FedCorrPartitionParams),
})


def partition(labels: np.ndarray, config: PartitionConfig, seed: int) -> list:
  """Splits range(len(labels)) over config.num_clients clients (sorted int64 arrays)."""
  split = PARTITIONS.lookup(config.name).resolve()
  labels = np.asarray(labels)
  if config.num_clients > len(labels):
    raise ConfigError(f'partition.num_clients: {config.num_clients} clients but only '
                      f'{len(labels)} training samples to share')
  parts = split(labels, config, generator(seed, _STREAM))
  return [np.sort(p).astype(np.int64) for p in parts]
