"""``ClientData``: a client's examples for one round, and the batch order every runtime follows.

A client's round data is its per-example arrays (``x``, ``y``, ``index`` and a method's
extra fields), the round's shuffle seed and the batch size. ``dataset()`` is the
``tf.data`` pipeline TFF's client work iterates (shuffled once per pass, then batched).
``batch_orders`` gives the very same example order for many clients at once without
building a pipeline per client: the shuffle's own random stream, computed in NumPy
(``shuffle_orders``), so the in-process runtime that stacks clients sees exactly the
batches the TFF runtime sees (tested equal).
"""

import collections
from typing import NamedTuple, Sequence

import numpy as np
import tensorflow as tf
# The seed pair a shuffle op gets from an op seed (it reads the global seed).
from tensorflow.python.framework import random_seed  # pylint: disable=g-direct-tensorflow-import

from tff_noisy.federated import shuffle_orders


class ClientData(NamedTuple):
  """One client's round: per-example ``features`` (``x``, ``y``, ``index``, extras)."""
  features: collections.OrderedDict
  shuffle_seed: int
  batch_size: int

  @property
  def num_examples(self) -> int:
    return len(self.features['y'])

  def dataset(self) -> tf.data.Dataset:
    """The batched ``tf.data`` dataset: one shuffle of all examples per pass, seeded.

    The seed reaches the shuffle as a tensor made from a NumPy array, not as a Python
    int: TensorFlow caches the eager tensor of every Python scalar it converts, for the
    life of the process, and a new seed per client and round made the driver grow about
    0.7 KB each (``benchmarks/dataset_leak.py``). The same seed pair, the same order."""
    dataset = tf.data.Dataset.from_tensor_slices(self.features)
    seed = tf.constant(np.array(self.shuffle_seed, np.int64))
    return dataset.shuffle(max(self.num_examples, 1), seed=seed).batch(self.batch_size)


def steps_per_pass(num_examples: int, batch_size: int) -> int:
  """Batches of ``batch_size`` in one pass over ``num_examples``: ceil(n / B)."""
  return -(-int(num_examples) // int(batch_size))


def make_client_data(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle_seed: int,
                     extra=None) -> ClientData:
  """A client's ``ClientData``; ``index`` is each example's position in its data. Arrays
  already of the field's dtype are kept, not copied (nothing writes to a client's data)."""
  features = collections.OrderedDict(x=np.asarray(x, np.float32), y=np.asarray(y, np.int64),
                                     index=np.arange(len(y), dtype=np.int64))
  features.update(extra or {})
  return ClientData(features, int(shuffle_seed), int(batch_size))


def as_dataset(client) -> tf.data.Dataset:
  """A ``tf.data.Dataset`` from a ``ClientData`` or a dataset (returned as it is)."""
  return client.dataset() if isinstance(client, ClientData) else client


def batch_orders(clients: Sequence[ClientData], passes: int) -> list:
  """Each client's example indices in the order ``dataset().repeat(passes)`` yields them,
  computed for all clients at once without a pipeline (``shuffle_orders``; equal to the
  per-client pipelines': ``tests/federated/test_client_data.py``)."""
  sizes = np.array([c.num_examples for c in clients], np.int64)
  seeds = np.array([random_seed.get_seed(c.shuffle_seed) for c in clients],
                   np.int64).reshape(-1, 2)  # Reads the global seed, as dataset() does.
  return shuffle_orders.shuffle_orders(sizes, seeds, passes)
