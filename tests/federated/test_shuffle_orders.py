"""``shuffle_orders``: Philox4x32-10's published answers, and ``tf.data``'s shuffle orders."""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import random_seed  # pylint: disable=g-direct-tensorflow-import

from tff_noisy.federated import shuffle_orders

# The known-answer vectors of the Random123 library (Salmon et al. 2011), which defined
# Philox4x32-10: (counter, key) -> the block's 4 words.
KNOWN_ANSWERS = [
    ([0, 0, 0, 0], [0, 0], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    ([0xffffffff] * 4, [0xffffffff] * 2, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    ([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
]


def _u32(values):
  return np.array(values, np.uint64).astype(np.uint32)


@pytest.mark.parametrize('counter, key, expected', KNOWN_ANSWERS)
def test_philox_matches_the_published_known_answers(counter, key, expected):
  np.testing.assert_array_equal(shuffle_orders.philox4x32(_u32(counter), _u32(key)),
                                _u32(expected))


def test_philox_samples_read_the_blocks_word_by_word():
  # Seed (lo, hi) = (2**32 + 5, 7): key (5, 1), block b's counter (b, 0, 7, 0).
  samples = shuffle_orders.philox_samples(np.array([2**32 + 5]), np.array([7]), 6)
  first = shuffle_orders.philox4x32(_u32([0, 0, 7, 0]), _u32([5, 1]))
  second = shuffle_orders.philox4x32(_u32([1, 0, 7, 0]), _u32([5, 1]))
  np.testing.assert_array_equal(samples[0], np.concatenate([first, second[:2]]))


def _tf_data_order(n, seed, passes):
  dataset = tf.data.Dataset.range(n).shuffle(max(n, 1), seed=seed).repeat(passes)
  return np.fromiter(dataset.as_numpy_iterator(), np.int64, count=n * passes)


@pytest.mark.parametrize('global_seed', [None, 0, 1234])
def test_orders_equal_tf_datas_shuffle(global_seed):
  """Sizes 0 to 300 (buffer = n), seeds over the whole int64 range, 1 to 3 passes."""
  if global_seed is not None:
    tf.random.set_seed(global_seed)
  rng = np.random.default_rng(0)
  sizes = [0, 1, 2, 5, 17, 40, 300]
  seeds = [0, -3, 2**31 - 1, int(rng.integers(2**62)), 11, 12, 13]
  pairs = [random_seed.get_seed(s) for s in seeds]
  for passes in (1, 3):
    orders = shuffle_orders.shuffle_orders(sizes, pairs, passes)
    for n, seed, order in zip(sizes, seeds, orders):
      np.testing.assert_array_equal(order, _tf_data_order(n, seed, passes))
      assert sorted(order[:n]) == list(range(n))


def test_no_pass_or_no_example_gives_empty_orders():
  assert [len(o) for o in shuffle_orders.shuffle_orders([0, 0], [(1, 2), (3, 4)], 2)] == [0, 0]
  assert [len(o) for o in shuffle_orders.shuffle_orders([3, 4], [(1, 2), (3, 4)], 0)] == [0, 0]
