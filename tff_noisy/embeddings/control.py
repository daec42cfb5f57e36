"""``control_supervised``: a CONTROL encoder that sees clean labels. Not a method.

It answers "is it the code or the encoder?" for the methods that embed client inputs
(FedLN's NNC, LSC): an encoder trained on the true labels of images no client holds
is an upper bound on what a good pretrained encoder can give them. Its results are
not those of a label-noise method and must not be reported as one; its ``encoder_id``
(``control-supervised-clean-labels-...``, recorded in results.json as ``nnc_encoder`` /
``extra.lsc.encoder``) says so, and a run that uses it warns so. It is used only where
a config names ``encoder: control_supervised`` exactly.

Held-out split: the training images of the run's dataset that no client holds (by
content: an image equal to any client's is excluded), i.e. those outside
``data.train_subset`` and the public split (``data.public_fraction``). A seeded
class-balanced subset of at most ``EXAMPLES`` of them, with their true labels, trains
the ``embed pretrain`` backbone (conv 32-64-128 + global average pooling, the
architecture of ``random`` and SimCLR, seeded as ``random``) and a linear softmax head
with cross-entropy, Adam 1e-3, batches of 128 for ``EPOCHS`` epochs. The head is then
dropped; the embedding is the backbone's 128-d representation, L2-normalised (as
SimCLR's). The trained weights are cached (``<cache>/encoders/<encoder_id>.npz``), so a
second run of the same data and seed does not train again.
"""

import hashlib
import json
import os

import numpy as np
import tensorflow as tf

from tff_noisy import files
from tff_noisy.data import federated, sources
from tff_noisy.embeddings import hub as hub_lib
from tff_noisy.embeddings import random_init
from tff_noisy.errors import ConfigError, warn

NAME = 'control_supervised'
EXAMPLES = 10000
EPOCHS = 10
BATCH_SIZE = 128
LEARNING_RATE = 1e-3


def _row_digests(x: np.ndarray) -> list:
  return [hashlib.blake2b(row.tobytes(), digest_size=16).digest()
          for row in np.ascontiguousarray(x)]


def held_out(data) -> tuple:
  """(images, true labels) of ``data``'s dataset's training split that no client holds.

  Raises ConfigError naming ``method.params.encoder`` if the dataset cannot be loaded
  by name (data from Python) or no client-free training image is left.
  """
  field = f'method.params.encoder: {NAME!r}'
  try:
    dataset = sources.load_dataset(data.dataset_name)
  except (ConfigError, sources.DatasetError) as e:
    raise ConfigError(f'{field} trains on training images of a named dataset that no '
                      f'client holds; cannot load {data.dataset_name!r}: '
                      f'{str(e).splitlines()[0]}') from None
  clients = set(_row_digests(np.concatenate([data.x[cid] for cid in data.client_ids])))
  free = np.array([d not in clients for d in _row_digests(dataset.x_train)], bool)
  if free.sum() < dataset.num_classes:
    raise ConfigError(f'{field} needs training images no client holds: the clients hold '
                      f'{len(free) - free.sum()} of {len(free)}; set data.train_subset '
                      'below the training split (or data.public_fraction > 0)')
  return dataset.x_train[free], dataset.y_train[free]


def _subset(labels: np.ndarray, num_classes: int, seed: int) -> np.ndarray:
  """A seeded class-balanced subset of at most EXAMPLES positions (as many as the
  smallest class allows)."""
  smallest = np.bincount(labels, minlength=num_classes).min()
  size = min(EXAMPLES, smallest * num_classes)
  return federated.class_balanced_subset(labels, size, num_classes, seed)


class SupervisedControlEncoder:
  """The backbone trained with clean labels on held-out images (see the module)."""

  dim = random_init.RandomBackboneEncoder.dim

  def __init__(self, x, y, num_classes: int, seed: int, batch_size: int = 512):
    index = _subset(np.asarray(y), num_classes, seed)
    self.x = hub_lib.as_float_inputs(x[index])
    self.y = np.asarray(y)[index].astype(np.int64)
    self.num_classes = num_classes
    self.seed = seed
    self.batch_size = batch_size
    digest = hashlib.sha256(json.dumps([
        self.x.shape, num_classes, seed, EPOCHS, BATCH_SIZE, LEARNING_RATE,
        random_init.WIDTH]).encode())
    digest.update(self.x.tobytes())
    digest.update(self.y.tobytes())
    self.encoder_id = 'control-supervised-clean-labels-' + digest.hexdigest()
    self._backbone = random_init.seeded_backbone(self.x.shape[1:], seed)
    path = os.path.join(sources.cache_root(), 'encoders', self.encoder_id[-40:] + '.npz')
    if os.path.exists(path):
      with np.load(path, allow_pickle=False) as f:
        self._backbone.set_weights([f[f'arr_{i}'] for i in range(len(f.files))])
    else:
      self._train()
      os.makedirs(os.path.dirname(path), exist_ok=True)
      files.write_atomically(path, files.npz_bytes(*self._backbone.get_weights()))
    warn(f"method.params.encoder: '{NAME}' is a control trained with the clean labels of "
         f'{len(self.y)} held-out images (an upper bound on a pretrained encoder, not a '
         'method)')

  def _train(self) -> None:
    head = tf.keras.layers.Dense(self.num_classes, kernel_initializer=(
        tf.keras.initializers.GlorotUniform(seed=self.seed * 1000 + 999)))
    head.build((None, self.dim))
    variables = self._backbone.trainable_variables + head.trainable_variables
    optimizer = tf.keras.optimizers.Adam(LEARNING_RATE)

    @tf.function
    def step(images, labels):
      with tf.GradientTape() as tape:
        logits = head(self._backbone(images, training=True))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
      optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    rng = np.random.default_rng([self.seed, 999])
    for _ in range(EPOCHS):
      order = rng.permutation(len(self.y))
      for start in range(0, len(order), BATCH_SIZE):
        batch = order[start:start + BATCH_SIZE]
        step(tf.constant(self.x[batch]), tf.constant(self.y[batch]))

  def embed(self, x) -> np.ndarray:
    """L2-normalised embeddings [N, 128] float32 of images x [N, H, W, C]."""
    x = hub_lib.as_float_inputs(x)
    if not len(x):
      raise ValueError('no inputs to embed')
    out = np.concatenate([self._backbone(x[start:start + self.batch_size], training=False)
                          for start in range(0, len(x), self.batch_size)])
    return (out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)).astype(
        np.float32)
