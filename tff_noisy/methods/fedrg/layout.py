"""A client's FedRG state as one float vector: its noise absorption matrix T [C, C], its
vMF mixture (μ [L, d], κ [L], β [L], π₀, M [C, L]) and the running median m of κ̂ with a
0/1 flag (set once Stage II has run a step). TensorFlow-free: ``unpack`` slices NumPy
arrays and tensors alike."""

import zlib

import numpy as np

from tff_noisy.ops import fedrg as fedrg_ops


class Layout:
  """Where each piece of the state lies in the vector."""

  def __init__(self, num_classes: int, components: int, dim: int):
    self.num_classes, self.components, self.dim = int(num_classes), int(components), int(dim)
    c, l, d = self.num_classes, self.components, self.dim
    shapes = [('t', (c, c)), ('mu', (l, d)), ('kappa', (l,)), ('beta', (l,)), ('pi0', ()),
              ('m', (c, l)), ('median', ()), ('median_set', ())]
    self.shapes = dict(shapes)
    self.slices, start = {}, 0
    for name, shape in shapes:
      size = int(np.prod(shape)) if shape else 1
      self.slices[name] = (start, start + size)
      start += size
    self.size = start

  def unpack(self, vector, reshape=np.reshape) -> dict:
    """``{name: piece}`` of ``vector`` [size] (``reshape``: ``tf.reshape`` for tensors)."""
    return {name: reshape(vector[a:b], self.shapes[name]) for name, (a, b) in
            self.slices.items()}

  def pack(self, pieces: dict) -> np.ndarray:
    """The float32 vector of ``pieces`` (every name)."""
    return np.concatenate([np.reshape(np.asarray(pieces[name], np.float64), [-1])
                           for name in self.slices]).astype(np.float32)

  def initial(self, labels, seed: int) -> np.ndarray:
    """The code's start (``fedrg.initial_mixture``, T = I, no median yet); μ drawn from
    ``seed`` and the client's labels, so each client draws its own."""
    labels = np.asarray(labels, np.int64)
    rng = np.random.default_rng([int(seed), zlib.crc32(labels.tobytes()), len(labels)])
    mixture = fedrg_ops.initial_mixture(self.num_classes, self.components, self.dim, rng)
    return self.pack(dict(mixture, t=np.eye(self.num_classes), median=0.0, median_set=0.0))
