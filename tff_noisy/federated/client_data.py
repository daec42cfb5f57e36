"""``ClientData``: a client's examples for one round, and the batch order every runtime follows.

A client's round data is its per-example arrays (``x``, ``y``, ``index`` and a method's
extra fields), the round's shuffle seed and the batch size. ``dataset()`` is its
``tf.data`` pipeline (shuffled once per pass, then batched: ``batched_pipeline``); TFF's
client work takes ``pipeline_input()`` and builds the same pipeline in its own graph.
``batch_orders`` gives the very same example order for many clients at once without
building a pipeline per client: the shuffle's own random stream, computed in NumPy
(``shuffle_orders``), so the in-process runtime that stacks clients sees exactly the
batches the TFF runtime sees (tested equal).
"""

import collections
from typing import NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf
# pylint: disable=g-direct-tensorflow-import
# The shuffle op itself, and the flat types of a dataset's elements it takes.
from tensorflow.python.data.util import structure
# The seed pair a shuffle op gets from an op seed (it reads the global seed).
from tensorflow.python.framework import random_seed
from tensorflow.python.ops import gen_dataset_ops
# pylint: enable=g-direct-tensorflow-import

from tff_noisy.federated import shuffle_orders


class ClientData(NamedTuple):
  """One client's round: per-example ``features`` (``x``, ``y``, ``index``, extras),
  shuffled each pass with ``shuffle_seed`` (``None``: kept in their order)."""
  features: collections.OrderedDict
  shuffle_seed: Optional[int]
  batch_size: int

  @property
  def num_examples(self) -> int:
    return len(self.features['y'])

  def seed_pair(self) -> np.ndarray:
    """int64 ``[2]``: the seed pair of the shuffle op, as ``Dataset.shuffle(n, seed)``
    derives it from this op seed and the global seed (``[0, 0]`` when not shuffled)."""
    if self.shuffle_seed is None:
      return np.zeros(2, np.int64)
    return np.array(random_seed.get_seed(self.shuffle_seed), np.int64)

  def pipeline_input(self) -> collections.OrderedDict:
    """What :func:`batched_pipeline` builds this client's dataset from, as NumPy values:
    TFF's client work takes these and builds the dataset in its own graph, so the driver
    makes and serialises no ``tf.data`` pipeline per client and round."""
    shuffled = self.shuffle_seed is not None
    return collections.OrderedDict(
        features=self.features, seed_pair=self.seed_pair(),
        shuffle_buffer=np.int64(max(self.num_examples, 1) if shuffled else 1),
        batch_size=np.int64(self.batch_size))

  def dataset(self) -> tf.data.Dataset:
    """The batched ``tf.data`` dataset: a new shuffle of all examples every pass."""
    return batched_pipeline(**self.pipeline_input())


def pipeline_input_spec(element_spec) -> collections.OrderedDict:
  """The ``tf.TensorSpec`` structure of ``ClientData.pipeline_input()`` for clients whose
  batched datasets have ``element_spec`` (a feature's spec is its batches': ``[None, ...]``)."""
  scalar = tf.TensorSpec([], tf.int64)
  return collections.OrderedDict(features=element_spec, seed_pair=tf.TensorSpec([2], tf.int64),
                                 shuffle_buffer=scalar, batch_size=scalar)


def batched_pipeline(features, seed_pair, shuffle_buffer, batch_size) -> tf.data.Dataset:
  """``from_tensor_slices(features).shuffle(shuffle_buffer).batch(batch_size)``, eagerly
  or in a graph, the shuffle seeded by the pair ``seed_pair`` and reshuffled every pass.

  The shuffle is the op ``Dataset.shuffle`` makes eagerly (``ShuffleDatasetV3`` with a
  dummy seed generator), called directly: the public method reads the seed pair's first
  half from the global seed when the pipeline is built, and in TFF's graph that is not
  the driver's. A buffer of 1 keeps the examples in their order. Every value comes in as
  a tensor: TensorFlow keeps the eager tensor of each Python scalar it converts, for the
  life of the process (``benchmarks/dataset_leak.py``)."""
  dataset = tf.data.Dataset.from_tensor_slices(features)
  seed_pair = tf.convert_to_tensor(seed_pair, tf.int64)
  variant = dataset._variant_tensor  # pylint: disable=protected-access
  shuffled = gen_dataset_ops.shuffle_dataset_v3(
      variant, buffer_size=tf.convert_to_tensor(shuffle_buffer, tf.int64),
      seed=seed_pair[0], seed2=seed_pair[1],
      seed_generator=gen_dataset_ops.dummy_seed_generator(), reshuffle_each_iteration=True,
      output_types=structure.get_flat_tensor_types(dataset.element_spec),
      output_shapes=structure.get_flat_tensor_shapes(dataset.element_spec))
  return (tf.data.experimental.from_variant(shuffled, dataset.element_spec)
          .batch(tf.convert_to_tensor(batch_size, tf.int64)))


def steps_per_pass(num_examples: int, batch_size: int) -> int:
  """Batches of ``batch_size`` in one pass over ``num_examples``: ceil(n / B)."""
  return -(-int(num_examples) // int(batch_size))


def make_client_data(x: np.ndarray, y: np.ndarray, batch_size: int,
                     shuffle_seed: Optional[int], extra=None) -> ClientData:
  """A client's ``ClientData``; ``index`` is each example's position in its data;
  ``shuffle_seed`` ``None`` keeps the examples in their order. Arrays already of the
  field's dtype are kept, not copied (nothing writes to a client's data)."""
  features = collections.OrderedDict(x=np.asarray(x, np.float32), y=np.asarray(y, np.int64),
                                     index=np.arange(len(y), dtype=np.int64))
  features.update(extra or {})
  return ClientData(features, None if shuffle_seed is None else int(shuffle_seed),
                    int(batch_size))


def as_dataset(client) -> tf.data.Dataset:
  """A ``tf.data.Dataset`` from a ``ClientData`` or a dataset (returned as it is)."""
  return client.dataset() if isinstance(client, ClientData) else client


def batch_orders(clients: Sequence[ClientData], passes: int) -> list:
  """Each client's example indices in the order ``dataset().repeat(passes)`` yields them,
  computed for all clients at once without a pipeline (``shuffle_orders``; equal to the
  per-client pipelines': ``tests/federated/test_client_data.py``)."""
  sizes = np.array([c.num_examples for c in clients], np.int64)
  seeds = np.array([c.seed_pair() for c in clients], np.int64).reshape(-1, 2)
  orders = shuffle_orders.shuffle_orders(sizes, seeds, passes)
  return [order if c.shuffle_seed is not None else np.tile(np.arange(c.num_examples), passes)
          for c, order in zip(clients, orders)]
