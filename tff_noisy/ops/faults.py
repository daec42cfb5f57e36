"""Simulated faulty clients: who drops out, who is Byzantine, and what a Byzantine client sends.

Everything is fixed by the run's seed. The Byzantine clients are a fixed set of
round-half-up(fraction x clients) chosen once from the seed (the same clients every round,
whichever rounds they are sampled in); the clients that drop out of round r are
round-half-up(fraction x sampled) of that round's sample, chosen from (seed, r). A
Byzantine client trains honestly and then replaces its upload (the model update) by:

- ``scale``: factor x update (a large-norm outlier);
- ``sign_flip``: -update (the sign-flipping attack);
- ``gaussian``: a draw of N(0, std^2) per coordinate, fresh for each client and round
  (Blanchard et al. 2017's "Gaussian Byzantine" worker);
- ``nan``: NaN in every coordinate (which the client work treats as any non-finite update).

``ops.faults_tf.corrupt`` is the TensorFlow twin of :func:`corrupt` that runs inside the
client's TFF computation. Which clients are faulty is simulation truth, for reporting.
"""

import collections
import dataclasses
from typing import ClassVar, List, Sequence

import numpy as np

from tff_noisy import registry
from tff_noisy.params import Params


@dataclasses.dataclass(frozen=True)
class ScaleParams(Params):
  """The faults field ``scale`` reads (checked with the config, ``config.validate``)."""
  prefix: ClassVar[str] = 'faults.'
  factor: float


@dataclasses.dataclass(frozen=True)
class GaussianParams(Params):
  """The faults field ``gaussian`` reads (checked with the config, ``config.validate``)."""
  prefix: ClassVar[str] = 'faults.'
  std: float


# faults.behaviour -> what a Byzantine client sends instead of its update.
BEHAVIOURS = registry.Registry('faults.behaviour', 'behaviour', {
    'scale': registry.Entry('a Byzantine client sends factor x its update', ScaleParams),
    'sign_flip': registry.Entry('a Byzantine client sends minus its update'),
    'gaussian': registry.Entry('a Byzantine client sends N(0, std^2) noise in place of its '
                               'update, drawn per client and round', GaussianParams),
    'nan': registry.Entry('a Byzantine client sends NaN everywhere (excluded as a '
                          'non-finite update and counted)'),
})
HONEST = 0
# A client's fault kind inside the computation: 0 honest, then BEHAVIOURS in order.
KINDS = {name: index + 1 for index, name in enumerate(BEHAVIOURS)}

# Third entry of the (seed, round, stream) seeds: apart from the driver's client sample
# (seed, round) and data order (seed, round, 1).
_DROPOUT_STREAM = 2
_GAUSSIAN_STREAM = 3
_BYZANTINE_STREAM = 4  # Drawn once, as if in round 0 (rounds count from 1).


def count(fraction: float, num: int) -> int:
  """round-half-up(fraction x num), so 30% of 10 is 3 whatever the float rounding."""
  return int(np.floor(fraction * num + 0.5 + 1e-9))


def byzantine_clients(client_ids: Sequence[str], fraction: float, seed: int) -> List[str]:
  """The fixed Byzantine clients: round-half-up(fraction x clients) of them, from ``seed``."""
  rng = np.random.default_rng([seed, 0, _BYZANTINE_STREAM])
  picked = rng.choice(len(client_ids), size=count(fraction, len(client_ids)), replace=False)
  return [client_ids[i] for i in np.sort(picked)]


def dropped_clients(sampled: Sequence[str], fraction: float, seed: int,
                    round_num: int) -> List[str]:
  """The clients of round ``round_num``'s sample that never report, from (seed, round)."""
  rng = np.random.default_rng([seed, round_num, _DROPOUT_STREAM])
  picked = rng.choice(len(sampled), size=count(fraction, len(sampled)), replace=False)
  return [sampled[i] for i in np.sort(picked)]


def noise_seed(seed: int, round_num: int, client_index: int) -> int:
  """The seed of a ``gaussian`` client's draw: fixed by (seed, round, client)."""
  rng = np.random.default_rng([seed, round_num, _GAUSSIAN_STREAM, client_index])
  return int(rng.integers(2**62))


def fault_spec(behaviour: str, factor: float, std: float, seed: int) -> dict:
  """A client's fault as the computation takes it; ``behaviour`` None: an honest client."""
  return collections.OrderedDict(
      kind=np.int32(HONEST if behaviour is None else KINDS[behaviour]),
      factor=np.float32(factor), std=np.float32(std), seed=np.int64(seed))


def corrupt(update: Sequence[np.ndarray], spec: dict) -> List[np.ndarray]:
  """What a client with fault ``spec`` uploads instead of ``update`` (float32 arrays).

  The ``gaussian`` draw here comes from NumPy's generator seeded by ``spec['seed']``; the
  TensorFlow twin draws the same distribution from TensorFlow's stateless generator.
  """
  kind = int(spec['kind'])
  update = [np.asarray(u, np.float32) for u in update]
  if kind == HONEST:
    return update
  if kind == KINDS['scale']:
    return [u * np.float32(spec['factor']) for u in update]
  if kind == KINDS['sign_flip']:
    return [-u for u in update]
  if kind == KINDS['gaussian']:
    rng = np.random.default_rng(int(spec['seed']))
    return [(rng.standard_normal(u.shape) * float(spec['std'])).astype(np.float32)
            for u in update]
  if kind == KINDS['nan']:
    return [np.full_like(u, np.nan) for u in update]
  raise ValueError(f'unknown fault kind {kind}')
