"""Self-supervised encoder pretraining: SimCLR (Chen et al. 2020) on unlabelled images.

The offline stand-in for a pretrained NNC encoder (docs/papers/fedln.md): a small conv backbone
plus a projection head is trained to match two random augmentations of each image with
the NT-Xent loss (Eq. 1), no labels used. As the paper recommends, the projection head
is discarded and the backbone's representation is the embedding. :func:`save_encoder`
writes it as a SavedModel that :class:`tff_noisy.embeddings.hub.HubEncoder` loads.
"""

import math
import os
import sys
import time
from typing import Optional

import numpy as np
import tensorflow as tf


def _conv_block(x, filters: int):
  x = tf.keras.layers.Conv2D(filters, 3, padding='same', use_bias=False)(x)
  x = tf.keras.layers.BatchNormalization()(x)
  return tf.keras.layers.ReLU()(x)


def build_backbone(input_shape, width: int = 32) -> tf.keras.Model:
  """Conv backbone: 3x3 conv-BN-ReLU layers of width, 2 width and 4 width channels, 2x2
  max-pooling between them while the feature map is at least 8 pixels wide, then global
  average pooling to a 4 width-d representation."""
  inputs = tf.keras.Input(input_shape)
  x = inputs
  for stage, filters in enumerate((width, 2 * width, 4 * width)):
    if stage and x.shape[1] >= 8:
      x = tf.keras.layers.MaxPool2D()(x)
    x = _conv_block(x, filters)
  outputs = tf.keras.layers.GlobalAveragePooling2D()(x)
  return tf.keras.Model(inputs, outputs, name='backbone')


def build_projection_head(representation_dim: int, output_dim: int = 64) -> tf.keras.Model:
  """SimCLR's g(.): Dense-ReLU-Dense from the representation to the loss space."""
  return tf.keras.Sequential([
      tf.keras.Input((representation_dim,)),
      tf.keras.layers.Dense(representation_dim, activation='relu'),
      tf.keras.layers.Dense(output_dim),
  ], name='projection_head')


def nt_xent_loss(z1, z2, temperature: float = 0.5) -> tf.Tensor:
  """NT-Xent (SimCLR Eq. 1), averaged over all 2N anchors.

  z1[i] and z2[i] are the projections of two views of image i; each view's positive is
  the other view, its negatives the other 2N - 2 views; similarity is cosine / tau.
  """
  z = tf.math.l2_normalize(tf.concat([z1, z2], axis=0), axis=1)
  n = tf.shape(z1)[0]
  logits = tf.matmul(z, z, transpose_b=True) / temperature
  logits -= 1e9 * tf.eye(2 * n)  # A view is not its own negative.
  positives = tf.concat([tf.range(n, 2 * n), tf.range(n)], axis=0)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(positives, logits))


def augment(images, generator: tf.random.Generator, flip: bool) -> tf.Tensor:
  """A random view of each image in [N, H, W, C] (values in [0, 1]).

  Random resized crop (area 35-100%, aspect 3/4-4/3), horizontal flip if ``flip``,
  brightness and contrast jitter, Gaussian noise and a cutout square of half the side.
  """
  shape = tf.shape(images)
  n, height, width = shape[0], shape[1], shape[2]
  area = generator.uniform([n], 0.35, 1.0)
  log_ratio = generator.uniform([n], math.log(3 / 4), math.log(4 / 3))
  box_h = tf.minimum(tf.sqrt(area / tf.exp(log_ratio)), 1.0)
  box_w = tf.minimum(tf.sqrt(area * tf.exp(log_ratio)), 1.0)
  top = generator.uniform([n]) * (1.0 - box_h)
  left = generator.uniform([n]) * (1.0 - box_w)
  boxes = tf.stack([top, left, top + box_h, left + box_w], axis=1)
  x = tf.image.crop_and_resize(images, boxes, tf.range(n), tf.stack([height, width]))
  if flip:
    flipped = generator.uniform([n, 1, 1, 1]) < 0.5
    x = tf.where(flipped, tf.reverse(x, axis=[2]), x)
  mean = tf.reduce_mean(x, axis=[1, 2, 3], keepdims=True)
  contrast = generator.uniform([n, 1, 1, 1], 0.6, 1.4)
  brightness = generator.uniform([n, 1, 1, 1], -0.2, 0.2)
  x = (x - mean) * contrast + mean + brightness
  x += generator.normal(tf.shape(x), stddev=0.05)
  side_h, side_w = height // 2, width // 2
  center_y = generator.uniform([n, 1, 1], 0, tf.cast(height, tf.float32))
  center_x = generator.uniform([n, 1, 1], 0, tf.cast(width, tf.float32))
  rows = tf.cast(tf.range(height), tf.float32)[None, :, None]
  cols = tf.cast(tf.range(width), tf.float32)[None, None, :]
  inside = ((tf.abs(rows - center_y) < tf.cast(side_h, tf.float32) / 2)
            & (tf.abs(cols - center_x) < tf.cast(side_w, tf.float32) / 2))
  x = tf.where(inside[..., None], 0.0, x)
  return tf.clip_by_value(x, 0.0, 1.0)


def pretrain(images, *, flip: bool, epochs: Optional[int] = None,
             minutes: Optional[float] = None, batch_size: int = 256, width: int = 32,
             temperature: float = 0.2, learning_rate: float = 1e-3,
             seed: int = 0) -> tf.keras.Model:
  """SimCLR on unlabelled images [N, H, W, C] in [0, 1]; returns the encoder.

  The encoder is the trained backbone, without the projection head (as the paper
  recommends), followed by L2 normalisation. Trains for ``epochs`` passes over the data
  and/or ``minutes`` of wall time, whichever ends first (one of them is required), with
  Adam on batches of ``batch_size`` (the last partial batch of each epoch is dropped).
  Seeded; prints epoch, mean loss and seconds to stderr.
  """
  if epochs is None and minutes is None:
    raise ValueError('give epochs and/or minutes')
  images = np.asarray(images, dtype=np.float32)
  batch_size = min(batch_size, len(images))
  if batch_size < 2:
    raise ValueError(f'need at least 2 images, got {len(images)}')
  tf.keras.utils.set_random_seed(seed)
  backbone = build_backbone(images.shape[1:], width)
  head = build_projection_head(backbone.output_shape[-1])
  variables = backbone.trainable_variables + head.trainable_variables
  optimizer = tf.keras.optimizers.Adam(learning_rate)
  generator = tf.random.Generator.from_seed(seed)

  @tf.function
  def train_step(batch):
    views = tf.concat([augment(batch, generator, flip), augment(batch, generator, flip)], 0)
    with tf.GradientTape() as tape:
      z1, z2 = tf.split(head(backbone(views, training=True), training=True), 2)
      loss = nt_xent_loss(z1, z2, temperature)
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  rng = np.random.default_rng(seed)
  steps_per_epoch = len(images) // batch_size
  deadline = time.monotonic() + 60 * minutes if minutes is not None else math.inf
  start = time.monotonic()
  epoch = 0
  while (epochs is None or epoch < epochs) and time.monotonic() < deadline:
    order = rng.permutation(len(images))
    losses = []
    for step in range(steps_per_epoch):
      if time.monotonic() >= deadline:
        break
      batch = images[order[step * batch_size:(step + 1) * batch_size]]
      losses.append(float(train_step(tf.constant(batch))))
    epoch += 1
    print(f'epoch {epoch}: loss {np.mean(losses):.4f} ({len(losses)} steps), '
          f'{time.monotonic() - start:.0f} s', file=sys.stderr, flush=True)
  # Neighbours by cosine similarity, the similarity NT-Xent trains.
  return tf.keras.Sequential([backbone, tf.keras.layers.UnitNormalization()], name='encoder')


class _EncoderModule(tf.Module):
  """A reusable SavedModel: ``__call__`` maps a float32 batch to its embedding."""

  def __init__(self, encoder: tf.keras.Model):
    super().__init__()
    self.encoder = encoder

  @tf.function
  def __call__(self, x):
    return self.encoder(x, training=False)


def save_encoder(encoder: tf.keras.Model, path, input_shape) -> str:
  """Writes the encoder as a SavedModel loadable with ``HubEncoder(path)``."""
  path = os.fspath(path)
  module = _EncoderModule(encoder)
  module.__call__.get_concrete_function(tf.TensorSpec([None, *input_shape], tf.float32))
  tf.saved_model.save(module, path)
  return path
