"""``ClientData``: a client's examples for one round, and the batch order every runtime follows.

A client's round data is its per-example arrays (``x``, ``y``, ``index`` and a method's
extra fields), the round's shuffle seed and the batch size. ``dataset()`` is the
``tf.data`` pipeline TFF's client work iterates (shuffled once per pass, then batched).
``batch_orders`` gives the very same example order for many clients at once without
building a pipeline per client: one ``tf.data`` pipeline over all of them, the same
shuffle op with each client's seed pair, so the in-process runtime that stacks clients sees
exactly the batches the TFF runtime sees (tested equal).
"""

import collections
from typing import NamedTuple, Sequence

import numpy as np
import tensorflow as tf
# The seed pair a shuffle op gets from an op seed, and the shuffle op itself: public
# ``Dataset.shuffle`` cannot take a tensor seed when the global seed is 0.
from tensorflow.python.data.ops import dataset_ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.framework import random_seed  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import gen_dataset_ops  # pylint: disable=g-direct-tensorflow-import


class ClientData(NamedTuple):
  """One client's round: per-example ``features`` (``x``, ``y``, ``index``, extras)."""
  features: collections.OrderedDict
  shuffle_seed: int
  batch_size: int

  @property
  def num_examples(self) -> int:
    return len(self.features['y'])

  def dataset(self) -> tf.data.Dataset:
    """The batched ``tf.data`` dataset: one shuffle of all examples per pass, seeded."""
    dataset = tf.data.Dataset.from_tensor_slices(self.features)
    return dataset.shuffle(max(self.num_examples, 1), seed=self.shuffle_seed).batch(
        self.batch_size)


def steps_per_pass(num_examples: int, batch_size: int) -> int:
  """Batches of ``batch_size`` in one pass over ``num_examples``: ceil(n / B)."""
  return -(-int(num_examples) // int(batch_size))


def make_client_data(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle_seed: int,
                     extra=None) -> ClientData:
  """A client's ``ClientData``; ``index`` is each example's position in its data."""
  features = collections.OrderedDict(x=x.astype(np.float32), y=y.astype(np.int64),
                                     index=np.arange(len(y), dtype=np.int64))
  features.update(extra or {})
  return ClientData(features, int(shuffle_seed), int(batch_size))


def as_dataset(client) -> tf.data.Dataset:
  """A ``tf.data.Dataset`` from a ``ClientData`` or a dataset (returned as it is)."""
  return client.dataset() if isinstance(client, ClientData) else client


class _SeededShuffle(dataset_ops.UnaryUnchangedStructureDataset):
  """``Dataset.shuffle`` (reshuffled on every pass) with the op's seed pair as tensors."""

  def __init__(self, input_dataset, buffer_size, seed, seed2):
    self._input_dataset = input_dataset
    self._name = None
    variant = gen_dataset_ops.shuffle_dataset_v3(
        input_dataset._variant_tensor, buffer_size=buffer_size, seed=seed,  # pylint: disable=protected-access
        seed2=seed2, seed_generator=gen_dataset_ops.dummy_seed_generator(),
        reshuffle_each_iteration=True, **self._common_args)
    super().__init__(input_dataset, variant)


@tf.function(input_signature=(tf.TensorSpec([None], tf.int64), tf.TensorSpec([None, 2], tf.int64),
                              tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int64)))
def _concatenated_orders(sizes, seeds, passes, total):
  """Every client's order, one after the other: ``flat_map`` over (size, seed pair) with
  the shuffle op of ``ClientData.dataset`` repeated ``passes`` times; ``total`` > 0 is
  their summed length. Traced once per process (the clients and passes are inputs)."""
  pipeline = tf.data.Dataset.from_tensor_slices((sizes, seeds)).flat_map(
      lambda n, seed: _SeededShuffle(tf.data.Dataset.range(n), tf.maximum(n, 1), seed[0],
                                     seed[1]).repeat(passes))
  return pipeline.batch(total).get_single_element()


def batch_orders(clients: Sequence[ClientData], passes: int) -> list:
  """Each client's example indices in the order ``dataset().repeat(passes)`` yields them.

  One pipeline for all clients (``_concatenated_orders``), so the orders equal the
  per-client pipelines' (``tests/federated/test_client_data.py``) at a fraction of
  their cost.
  """
  sizes = np.array([c.num_examples for c in clients], np.int64)
  seeds = np.array([random_seed.get_seed(c.shuffle_seed) for c in clients],
                   np.int64).reshape(-1, 2)  # Reads the global seed, as dataset() does.
  total = int(sizes.sum()) * passes
  flat = (_concatenated_orders(sizes, seeds, np.int64(passes), np.int64(total)).numpy()
          if total else np.zeros(0, np.int64))
  return np.split(flat, np.cumsum(sizes * passes)[:-1])
