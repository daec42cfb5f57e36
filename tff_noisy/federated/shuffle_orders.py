"""The example orders of ``tf.data``'s shuffle, for many clients at once, in NumPy.

``ClientData.dataset()`` shuffles a client's n examples with a buffer of n and a new
order every pass (``Dataset.shuffle(n, seed).repeat(passes)``). TensorFlow draws those
orders from the counter-based Philox4x32-10 generator (Salmon et al., SC 2011), so they
can be computed without a pipeline, for every client of a group in one vectorised pass:

1. The op's seed pair ``(s1, s2)`` (``random_seed.get_seed`` of the client's seed) seeds
   the dataset's seed generator; pass ``e`` draws its own pair as the generator's 32-bit
   samples ``2e`` and ``2e + 1``.
2. That pair seeds the pass's generator; output ``k`` (0-based) takes the buffer slot
   ``k + r_k mod (n - k)`` with ``r_k`` the generator's sample ``k``, then moves the
   element at slot ``k`` into it: a Fisher-Yates shuffle driven by the Philox stream.

A generator seeded ``(lo, hi)`` (two 64-bit integers) has the key ``lo`` and the counter
``(block, hi)``; its sample ``i`` is word ``i mod 4`` of the block ``i div 4``.
``tests/federated/test_shuffle_orders.py`` holds these orders equal to ``tf.data``'s.
"""

import numpy as np

_MULTIPLIERS = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_KEY_INCREMENTS = (np.uint32(0x9E3779B9), np.uint32(0xBB67AE85))
_LOW_32 = np.uint64(0xFFFFFFFF)
_ROUNDS = 10


def philox4x32(counter, key) -> np.ndarray:
  """Philox4x32-10 (Salmon et al. 2011, §3.3): ``counter`` uint32 ``[..., 4]``, ``key``
  uint32 ``[..., 2]`` (broadcast together) -> the 4 words of each block, uint32."""
  counter = np.asarray(counter, np.uint32)
  key = np.asarray(key, np.uint32)
  shape = np.broadcast_shapes(counter.shape[:-1], key.shape[:-1])
  x0, x1, x2, x3 = (np.broadcast_to(counter[..., i], shape) for i in range(4))
  k0, k1 = (np.broadcast_to(key[..., i], shape) for i in range(2))
  for round_index in range(_ROUNDS):
    p0 = _MULTIPLIERS[0] * x0.astype(np.uint64)
    p1 = _MULTIPLIERS[1] * x2.astype(np.uint64)
    x0, x1, x2, x3 = ((p1 >> np.uint64(32)).astype(np.uint32) ^ x1 ^ k0,
                      (p1 & _LOW_32).astype(np.uint32),
                      (p0 >> np.uint64(32)).astype(np.uint32) ^ x3 ^ k1,
                      (p0 & _LOW_32).astype(np.uint32))
    if round_index < _ROUNDS - 1:
      with np.errstate(over='ignore'):  # The key's words wrap around 2**32.
        k0, k1 = k0 + _KEY_INCREMENTS[0], k1 + _KEY_INCREMENTS[1]
  return np.stack([x0, x1, x2, x3], axis=-1)


def _split_64(values):
  values = np.asarray(values).astype(np.uint64)  # Two's complement, as C++'s cast.
  return (values & _LOW_32).astype(np.uint32), (values >> np.uint64(32)).astype(np.uint32)


def philox_samples(seed_lo, seed_hi, count: int) -> np.ndarray:
  """``[G, count]`` uint32: the first ``count`` samples of each of G generators seeded
  ``(seed_lo[g], seed_hi[g])`` (module doc), as TensorFlow's ``PhiloxRandom`` read one
  sample at a time (``SingleSampleAdapter``)."""
  blocks = np.arange(-(-int(count) // 4), dtype=np.uint64)
  key = np.stack(_split_64(seed_lo), axis=-1)[:, None, :]
  hi_lo, hi_hi = _split_64(seed_hi)
  block_lo, block_hi = _split_64(blocks)
  counter = np.stack(np.broadcast_arrays(block_lo[None, :], block_hi[None, :],
                                         hi_lo[:, None], hi_hi[:, None]), axis=-1)
  words = philox4x32(counter, key)
  return words.reshape(len(key), -1)[:, :count]


def shuffle_orders(sizes, seed_pairs, passes: int) -> list:
  """Each client's example indices over ``passes`` passes, as ``Dataset.range(n)
  .shuffle(max(n, 1), seed).repeat(passes)`` yields them (module doc): ``sizes`` [G]
  example counts, ``seed_pairs`` [G, 2] the shuffle op's seed pairs."""
  sizes = np.asarray(sizes, np.int64)
  seed_pairs = np.asarray(seed_pairs, np.int64).reshape(-1, 2)
  longest = int(sizes.max(initial=0))
  if not longest or not passes:
    return [np.zeros(0, np.int64) for _ in sizes]
  pass_seeds = philox_samples(seed_pairs[:, 0], seed_pairs[:, 1], 2 * passes)
  rows = np.arange(len(sizes))
  remaining = np.maximum(sizes[:, None] - np.arange(longest)[None, :], 1)  # n - k.
  orders = np.empty((len(sizes), passes, longest), np.int64)
  for p in range(passes):
    draws = philox_samples(pass_seeds[:, 2 * p], pass_seeds[:, 2 * p + 1], longest)
    picks = np.arange(longest)[None, :] + draws.astype(np.int64) % remaining
    buffer = np.tile(np.arange(longest), (len(sizes), 1))
    for k in range(longest):  # Slots past a client's n are never read.
      chosen = picks[:, k]
      orders[:, p, k] = buffer[rows, chosen]
      buffer[rows, chosen] = buffer[:, k]
  return [orders[g, :, :n].reshape(-1) for g, n in enumerate(sizes)]
