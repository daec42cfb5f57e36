"""Σ_j w_j x_j over clients' stacked update rows, in the order TensorFlow's CPU adds them.

The weighted mean's in-process form (``mean.py``) is ``tf.reduce_sum(x * w, axis=0) /
tf.reduce_sum(w)`` over every client's row at once. On the CPU, TensorFlow's reduction
over the leading axis (Eigen's reduction that keeps the inner dimensions) walks down the
client axis once per output packet: a strided pass over all the rows, slower than reading
them once (84 ms for 10,000 clients of the digits MLP, against about 35 ms here), and it
needs the rows in one tensor (a copy of every group's updates) and ``x * w`` as another.

:func:`weighted_row_sum` reads the rows block by block, as the client runtime's groups
left them, and adds them in Eigen's own order, so its result is the same to the bit:

- one row: that row (TensorFlow copies it: a product of -0 stays -0);
- fewer than 16 rows: every coefficient is ``((0 + r_0) + r_1) + ...``, row by row;
- otherwise, for the coefficients that fill whole packets (the first ``W * (P // W)`` of
  each row's ``P``, ``W`` floats a packet): four accumulators ``a_k = (0 + r_k) + r_{k+4}
  + ...`` over the first ``4 * (J // 4)`` rows, then ``((a_0 + a_1) + a_2) + a_3``, then
  the last ``J % 4`` rows one by one; the remaining coefficients row by row.

Here ``r_j = x_j * w_j`` rounded to float32, as ``x * w`` is. A leaf whose rows hold one
value (a scalar, or ``[1]``) is a full reduction to TensorFlow, summed in another order:
such leaves stay with TensorFlow's expression, as does everything when
:func:`packet_width` finds no ``W`` for which this order equals TensorFlow's on a probe
(another build, or TensorFlow placing the sum on a GPU).
"""

import functools
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

_FEW_ROWS = 16  # Below this many rows Eigen adds them one by one.
_ACCUMULATORS = 4
_BLOCKS_PER_CALL = 16  # Blocks of 4 rows scaled by one NumPy call (2 MB for the MLP's kernel).
_PROBE_WIDTHS = (8, 16, 4)  # AVX (TensorFlow's pip wheels), AVX-512, SSE/NEON.


def tensorflow_weighted_sum(x, weights):
  """``tf.reduce_sum(x * w, axis=0)``: what :func:`weighted_row_sum` reproduces."""
  x, weights = tf.convert_to_tensor(x), tf.cast(weights, tf.float32)
  return tf.reduce_sum(x * tf.reshape(weights, [-1] + [1] * (x.shape.rank - 1)), axis=0)


def summable(shape: Sequence[int]) -> bool:
  """Whether rows of this shape (without the client axis) are summed here."""
  return int(np.prod(shape, dtype=np.int64)) > 1


def weighted_row_sum(blocks: Sequence[np.ndarray], weights: np.ndarray,
                     width: int) -> np.ndarray:
  """Σ_j w_j x_j over the rows of ``blocks`` (float32 ``[J_i, ...]``, in row order), with
  ``width`` floats a packet: the float32 result of ``tensorflow_weighted_sum`` on the
  concatenated rows, bit for bit."""
  inner = blocks[0].shape[1:]
  size = int(np.prod(inner, dtype=np.int64))
  rows = [np.asarray(b, np.float32).reshape(len(b), size) for b in blocks]
  weights = np.asarray(weights, np.float32)
  num_rows = sum(len(r) for r in rows)
  if num_rows == 1:
    return (np.concatenate(rows)[0] * weights[0]).reshape(inner)
  packed = 0 if num_rows < _FEW_ROWS else width * (size // width)
  total = np.empty(size, np.float32)
  if packed:
    total[:packed] = _four_accumulators(rows, weights, packed)
  if packed < size:
    starts = np.cumsum([0] + [len(r) for r in rows[:-1]])
    scaled = [r[:, packed:] * weights[s:s + len(r), None] for r, s in zip(rows, starts)]
    total[packed:] = np.add.accumulate(  # Row by row, from 0.
        np.concatenate([np.zeros((1, size - packed), np.float32)] + scaled), axis=0)[-1]
  return total.reshape(inner)


def _four_accumulators(rows: list, weights: np.ndarray, packed: int) -> np.ndarray:
  """The packet coefficients ``[:packed]``: row ``j < 4 * (J // 4)`` into accumulator
  ``j % 4``, in row order; the accumulators added in order; then the last rows."""
  num_rows = len(weights)
  unrolled = _ACCUMULATORS * (num_rows // _ACCUMULATORS)
  accumulators = np.zeros((_ACCUMULATORS, packed), np.float32)
  flat = accumulators.reshape(-1)
  scratch = np.empty((_BLOCKS_PER_CALL, _ACCUMULATORS * packed), np.float32)
  last_rows = []
  row = 0  # The first row of the block being read, over all blocks.
  for block in rows:
    i = 0
    while i < len(block):
      j = row + i
      if j >= unrolled:
        last_rows.append(block[i, :packed] * weights[j])
        i += 1
      elif j % _ACCUMULATORS or len(block) - i < _ACCUMULATORS:
        accumulators[j % _ACCUMULATORS] += block[i, :packed] * weights[j]
        i += 1
      else:  # Whole groups of 4 rows: scaled together, then added one group at a time.
        count = min(_BLOCKS_PER_CALL, (len(block) - i) // _ACCUMULATORS,
                    (unrolled - j) // _ACCUMULATORS)
        group = block[i:i + _ACCUMULATORS * count, :packed]
        np.multiply(group.reshape(count, _ACCUMULATORS, packed),
                    weights[j:j + _ACCUMULATORS * count].reshape(count, _ACCUMULATORS, 1),
                    out=scratch[:count].reshape(count, _ACCUMULATORS, packed))
        for k in range(count):
          np.add(flat, scratch[k], out=flat)
        i += _ACCUMULATORS * count
    row += len(block)
  total = ((accumulators[0] + accumulators[1]) + accumulators[2]) + accumulators[3]
  for last in last_rows:
    total = total + last
  return total


@functools.lru_cache(maxsize=None)
def packet_width() -> Optional[int]:
  """The packet width for which :func:`weighted_row_sum` equals TensorFlow's sum here, on
  probes built so that every order differs (magnitudes over 10^±5, rows 13, 16 and 37,
  coefficients past the packets); None when no width does."""
  rng = np.random.default_rng(0)
  probes = []
  for num_rows, inner in ((37, (47,)), (37, (6, 12)), (16, (33,)), (13, (40,))):
    shape = (num_rows,) + inner
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-12, 12, shape))).astype(np.float32)
    w = rng.uniform(0, 9, num_rows).astype(np.float32)
    probes.append((x, w, tensorflow_weighted_sum(tf.constant(x), tf.constant(w)).numpy()))
  for width in _PROBE_WIDTHS:
    if all(np.array_equal(weighted_row_sum(np.split(x, [5, 21]), w, width).view(np.int32),
                          want.view(np.int32)) for x, w, want in probes):
      return width
  return None
