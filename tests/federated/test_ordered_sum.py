"""The weighted row sum in TensorFlow's order: equal to ``tf.reduce_sum`` to the bit."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.federated.aggregators import ordered_sum

SHAPES = [(2,), (7,), (8,), (9,), (10,), (17,), (47,), (128,), (64, 128), (128, 10), (3, 5),
          (5, 5, 3, 8)]
ROWS = [1, 2, 3, 5, 15, 16, 17, 18, 19, 31, 33, 64, 1025]


def _values(rng, shape):
  """Magnitudes over 10^±5, so that any other order of addition gives other bits."""
  return (rng.standard_normal(shape) * np.exp(rng.uniform(-12, 12, shape))).astype(np.float32)


def _bits(x):
  return np.asarray(x, np.float32).view(np.int32)


def test_a_packet_width_is_found_on_this_machine():
  """The CPU build this project pins (AVX, 8 floats a packet) is one the order knows."""
  assert ordered_sum.packet_width() in (4, 8, 16)


@pytest.mark.parametrize('shape', SHAPES)
def test_equals_tensorflow_bit_for_bit_in_any_blocks(shape):
  """Every number of rows either side of the 16-row and 4-row thresholds, coefficients in
  and past the packets, rows cut into 1-6 blocks of any size (an empty one too)."""
  rng = np.random.default_rng(len(shape) * 100 + shape[-1])
  width = ordered_sum.packet_width()
  graph_sum = tf.function(ordered_sum.tensorflow_weighted_sum, reduce_retracing=True)
  for num_rows in ROWS:
    x = _values(rng, (num_rows,) + shape)
    w = rng.uniform(0, 50, num_rows).astype(np.float32)
    w[num_rows // 2] = 0  # An excluded client.
    cuts = np.sort(rng.integers(0, num_rows + 1, size=rng.integers(0, 6)))
    want = ordered_sum.tensorflow_weighted_sum(x, w).numpy()
    np.testing.assert_array_equal(_bits(graph_sum(x, w)), _bits(want))
    got = ordered_sum.weighted_row_sum(np.split(x, cuts), w, width)
    np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f'{num_rows} rows')


def test_another_order_gives_other_bits():
  """The probe values tell orders apart: NumPy's own sum of the same products differs."""
  rng = np.random.default_rng(0)
  x, w = _values(rng, (37, 47)), rng.uniform(0, 9, 37).astype(np.float32)
  want = ordered_sum.tensorflow_weighted_sum(x, w).numpy()
  assert not np.array_equal(_bits((x * w[:, None]).sum(axis=0)), _bits(want))
  wrong_width = 16 if ordered_sum.packet_width() != 16 else 8
  assert not np.array_equal(_bits(ordered_sum.weighted_row_sum([x], w, wrong_width)),
                            _bits(want))


def test_single_values_stay_with_tensorflow():
  """A row of one value is a full reduction to TensorFlow (another order): not summed here."""
  assert not ordered_sum.summable(()) and not ordered_sum.summable((1,))
  assert ordered_sum.summable((2,)) and ordered_sum.summable((64, 128))
