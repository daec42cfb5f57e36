"""SELFIE's per-example state as one float32 table, a row per example: the q history slots
(predicted classes), the count of predictions written, the refurbished label (-1: none).
Integers below 2**24 are exact in float32: a count stays exact for 16.7 million visits of
an example. NumPy (the client part reads the same columns in TensorFlow)."""

import numpy as np

from tff_noisy.ops import selfie


def width(queue_size: int) -> int:
  return int(queue_size) + 2


def pack(history, count, refurbished) -> np.ndarray:
  """[n, q + 2] float32 of ``history`` [n, q], ``count`` [n], ``refurbished`` [n]."""
  return np.concatenate([np.asarray(history, np.float32),
                         np.asarray(count, np.float32)[:, None],
                         np.asarray(refurbished, np.float32)[:, None]], axis=1)


def unpack(rows, queue_size: int) -> tuple:
  """``(history int32 [n, q], count int32 [n], refurbished int32 [n])`` of ``rows``."""
  rows = np.asarray(rows)
  q = int(queue_size)
  return (rows[:, :q].astype(np.int32), rows[:, q].astype(np.int32),
          rows[:, q + 1].astype(np.int32))


def initial(num_examples: int, queue_size: int) -> np.ndarray:
  """A client's rows before its first round (``ops.selfie.init_state``)."""
  return pack(*selfie.init_state(num_examples, queue_size))
