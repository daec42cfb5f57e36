"""TensorFlow twin of ``ops.faults.corrupt``: a Byzantine upload, inside the client work."""

import collections

import tensorflow as tf

from tff_noisy.ops import faults

# A client's fault as its computation receives it (``faults.fault_spec``).
FAULT_SPEC = collections.OrderedDict(
    kind=tf.TensorSpec([], tf.int32), factor=tf.TensorSpec([], tf.float32),
    std=tf.TensorSpec([], tf.float32), seed=tf.TensorSpec([], tf.int64))


def corrupt(update, spec):
  """``update`` (a structure of float tensors) as a client with fault ``spec`` sends it.

  ``gaussian`` draws tensor i from ``tf.random.stateless_normal`` with seed
  (spec seed, i): the same spec gives the same draw, so a resumed run repeats it.
  """
  flat = tf.nest.flatten(update)
  spec = {name: tf.convert_to_tensor(spec[name], s.dtype) for name, s in FAULT_SPEC.items()}

  def gaussian():
    return [tf.random.stateless_normal(tf.shape(t), tf.stack([spec['seed'], i]), dtype=t.dtype)
            * tf.cast(spec['std'], t.dtype) for i, t in enumerate(flat)]

  branches = {
      faults.HONEST: lambda: flat,
      faults.KINDS['scale']: lambda: [t * tf.cast(spec['factor'], t.dtype) for t in flat],
      faults.KINDS['sign_flip']: lambda: [-t for t in flat],
      faults.KINDS['gaussian']: gaussian,
      faults.KINDS['nan']: lambda: [tf.fill(tf.shape(t), tf.constant(float('nan'), t.dtype))
                                    for t in flat],
  }
  sent = tf.switch_case(spec['kind'], [branches[k] for k in sorted(branches)])
  return tf.nest.pack_sequence_as(update, sent)
