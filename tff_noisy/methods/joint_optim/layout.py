"""Joint Optimization's per-example state as one float32 table, a row per example: the
soft label (C), the history of softmax outputs (q·C, slot-major), the count of outputs
written, and ``due`` (1: the example was last visited in a round that updates labels, so an
epoch's end has come since and its label is to be rewritten from its history at its next
visit; ``parts``). A count is exact in float32 below 2**24 visits. NumPy."""

import numpy as np

from tff_noisy.ops import joint_optim


def width(num_classes: int, queue_size: int) -> int:
  return int(num_classes) * (int(queue_size) + 1) + 2


def pack(labels, history, count, due) -> np.ndarray:
  """[n, width] float32 of ``labels`` [n, C], ``history`` [n, q, C], ``count``, ``due`` [n]."""
  history = np.asarray(history, np.float32)
  return np.concatenate([np.asarray(labels, np.float32),
                         history.reshape(len(history), -1),
                         np.asarray(count, np.float32)[:, None],
                         np.asarray(due, np.float32)[:, None]], axis=1)


def unpack(rows, num_classes: int, queue_size: int) -> tuple:
  """``(labels [n, C], history [n, q, C], count int32 [n], due bool [n])`` of ``rows``."""
  rows = np.asarray(rows, np.float32)
  c, q = int(num_classes), int(queue_size)
  return (rows[:, :c], rows[:, c:c + q * c].reshape(len(rows), q, c),
          rows[:, c + q * c].astype(np.int32), rows[:, c + q * c + 1] > 0)


def initial(observed_labels, num_classes: int, queue_size: int) -> np.ndarray:
  """A client's rows before its first round (``ops.joint_optim.init_state``, nothing due)."""
  labels, history, count = joint_optim.init_state(observed_labels, num_classes, queue_size)
  return pack(labels, history, count, np.zeros(len(count)))


def current_labels(rows, num_classes: int, queue_size: int, hard: bool = False,
                   divide_by_filled: bool = False) -> np.ndarray:
  """[n, C]: each example's label as of the end of its last epoch (a due label rewritten
  from its history, ``ops.joint_optim.updated_labels``), what the next visit trains on."""
  labels, history, count, due = unpack(rows, num_classes, queue_size)
  updated = joint_optim.updated_labels(history, count, labels, hard, divide_by_filled)
  return np.where(due[:, None], updated, labels)
