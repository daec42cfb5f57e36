"""The GPU route: TensorFlow 2.14 on the pip-installed CUDA libraries, found without
hand-set paths, and the PTX start-up of GPUs it has no kernels for.

TensorFlow 2.14 looks for ``libcudart.so.11.0``, ``libcudnn.so.8``, ... on the loader's
search path only: the ``nvidia-*-cu11`` wheels (``make install-gpu``,
``requirements-gpu.lock``) put them in ``site-packages/nvidia/*/lib``, where it does not
look, and it then runs on the CPU with a warning. ``preload`` loads each of them by its
absolute path, globally, before TensorFlow is imported; TensorFlow's own ``dlopen`` of the
same soname then finds the loaded library. It touches nothing when those packages are
absent. ``import tff_noisy`` does not call it (no CUDA library is loaded and the driver is
not initialised at import, so a library user may still ``fork``):
``preload_before_tensorflow`` has it run at the first ``import tensorflow`` of the process,
just before TensorFlow loads, or at once if TensorFlow is loaded already.

TensorFlow 2.14's wheel has native kernels for compute capabilities 3.5, 5.0, 6.0, 7.0 and
7.5 and PTX for 8.0: any newer GPU (A100 included, Hopper's 9.0 too) has the driver
compile the PTX on first use, which can take 30 minutes or more, and again on every start
unless the driver's cache keeps it. ``preload`` asks the driver for each GPU's compute
capability and, where one needs that compilation, sets a persistent ``CUDA_CACHE_PATH``
under the project's cache and a ``CUDA_CACHE_MAXSIZE`` large enough for TensorFlow's
kernels (both only if unset) and says so once. No TensorFlow is imported here.
"""

import ctypes
import glob
import importlib.abc
import os
import sys
from typing import List, NamedTuple, Optional, Tuple

# The architectures TensorFlow 2.14.1's wheel has machine code for, and the PTX it has
# (``tf.sysconfig.get_build_info()['cuda_compute_capabilities']``).
NATIVE = ((3, 5), (5, 0), (6, 0), (7, 0), (7, 5))
PTX = (8, 0)
CACHE_MAXSIZE = str(4 * 2**30)  # The driver's default (256 MiB) drops TensorFlow's kernels.
# Load order: each library after those it needs (cuDNN and cuSOLVER need cuBLAS).
_ORDER = ('cuda_runtime', 'cuda_nvrtc', 'cublas', 'cufft', 'curand', 'cusparse',
          'cusolver', 'cudnn', 'nccl', 'cuda_cupti')
_done = None  # What ``preload`` found, once per process.


class Gpu(NamedTuple):
  name: str
  compute_capability: Tuple[int, int]

  @property
  def needs_ptx_compilation(self) -> bool:
    """No native kernel in the build for it: the driver compiles TensorFlow's PTX."""
    major, minor = self.compute_capability
    return not any(major == m and minor >= n for m, n in NATIVE)


class Preloaded(NamedTuple):
  libraries: List[str]  # Absolute paths loaded.
  failed: List[str]  # 'path: reason' of those that would not load.
  driver_version: Optional[str]  # 'MAJOR.MINOR' of the CUDA driver API, None: no driver.
  gpus: List[Gpu]
  cache_set: bool  # CUDA_CACHE_PATH was set here for a GPU that needs PTX compilation.


def nvidia_library_dirs() -> List[str]:
  """``.../site-packages/nvidia/<package>/lib`` of the installed ``nvidia-*`` wheels."""
  dirs = []
  for entry in sys.path:
    dirs += glob.glob(os.path.join(entry, 'nvidia', '*', 'lib'))
  return sorted(set(os.path.realpath(d) for d in dirs))


def _library_files(directory: str) -> List[str]:
  return sorted(f for f in glob.glob(os.path.join(directory, 'lib*.so*'))
                if os.path.isfile(f))


def _rank(path: str) -> int:
  package = os.path.basename(os.path.dirname(os.path.dirname(path)))
  return _ORDER.index(package) if package in _ORDER else len(_ORDER)


def preload(cache_root: Optional[str] = None, announce=None) -> Preloaded:
  """Loads the ``nvidia-*`` wheels' libraries (once per process) and prepares the CUDA
  cache where a GPU needs PTX compilation; see the module doc. ``announce(text)`` says
  so (default: stderr)."""
  global _done
  if _done is not None:
    return _done
  loaded, failed = [], []
  files = [f for d in nvidia_library_dirs() for f in _library_files(d)]
  for path in sorted(files, key=_rank):
    try:
      ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
      loaded.append(path)
    except OSError as e:
      failed.append(f'{path}: {e}')
  driver, gpus = driver_gpus()
  cache_set = False
  if any(gpu.needs_ptx_compilation for gpu in gpus) and 'CUDA_CACHE_PATH' not in os.environ:
    root = cache_root or os.environ.get('TFF_NOISY_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'tff-noisy')
    os.environ['CUDA_CACHE_PATH'] = os.path.join(root, 'cuda-ptx')
    os.environ.setdefault('CUDA_CACHE_MAXSIZE', CACHE_MAXSIZE)
    cache_set = True
    slow = ', '.join(f'{g.name} (compute capability {g.compute_capability[0]}.'
                     f'{g.compute_capability[1]})' for g in gpus if g.needs_ptx_compilation)
    (announce or (lambda text: print(text, file=sys.stderr, flush=True)))(
        f'tff-noisy: TensorFlow 2.14 has no native kernels for {slow}: the first start '
        'compiles them from PTX, which can take 30 minutes or more; they are kept in '
        f"{os.environ['CUDA_CACHE_PATH']} for later starts")
  _done = Preloaded(loaded, failed, driver, gpus, cache_set)
  return _done


class _BeforeTensorFlow(importlib.abc.MetaPathFinder):
  """A ``sys.meta_path`` finder that runs ``preload`` when ``tensorflow`` is about to be
  imported, then removes itself; it finds nothing, the usual finders import TensorFlow."""

  def find_spec(self, name, path=None, target=None):
    del path, target
    if name == 'tensorflow':
      if self in sys.meta_path:
        sys.meta_path.remove(self)
      preload()
    return None


def preload_before_tensorflow() -> None:
  """``preload`` at the first ``import tensorflow`` of this process (at once if it is
  loaded already); ``import tff_noisy`` calls it."""
  if 'tensorflow' in sys.modules:
    preload()
  elif not any(isinstance(finder, _BeforeTensorFlow) for finder in sys.meta_path):
    sys.meta_path.insert(0, _BeforeTensorFlow())


def driver_gpus() -> Tuple[Optional[str], List[Gpu]]:
  """``(driver API version, GPUs)`` from the CUDA driver (``libcuda.so.1``); ``(None,
  [])`` without a driver or a GPU. Does not create a context."""
  try:
    cuda = ctypes.CDLL('libcuda.so.1')
  except OSError:
    return None, []
  version = ctypes.c_int()
  if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
    return None, []
  driver = f'{version.value // 1000}.{version.value % 1000 // 10}'
  count = ctypes.c_int()
  if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
    return driver, []
  gpus = []
  for ordinal in range(count.value):
    device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    if cuda.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
      continue
    cuda.cuDeviceGetName(name, 256, device)
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, device)  # ..._COMPUTE_CAPABILITY_MAJOR
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, device)  # ..._COMPUTE_CAPABILITY_MINOR
    gpus.append(Gpu(name.value.decode(errors='replace'), (major.value, minor.value)))
  return driver, gpus


def loaded_cuda_libraries() -> List[str]:
  """The CUDA libraries mapped into this process (``/proc/self/maps``)."""
  names = ('libcuda.so', 'libcudart', 'libcublas', 'libcudnn', 'libcufft', 'libcurand',
           'libcusolver', 'libcusparse', 'libnccl', 'libcupti')
  try:
    with open('/proc/self/maps') as f:
      paths = {line.split()[-1] for line in f if len(line.split()) >= 6}
  except OSError:
    return []
  return sorted(p for p in paths if any(os.path.basename(p).startswith(n) for n in names))


def doctor() -> List[str]:
  """``tff-noisy doctor``: what TensorFlow was built with, the CUDA libraries found and
  loaded, the driver and GPUs, whether each needs PTX compilation, and one line of advice
  per problem. Imports TensorFlow (after ``preload``)."""
  found = preload()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  build = tf.sysconfig.get_build_info()
  lines = [f'TensorFlow {tf.__version__}: CUDA {build.get("cuda_version", "none")}, cuDNN '
           f'{build.get("cudnn_version", "none")}, kernels for '
           f'{", ".join(build.get("cuda_compute_capabilities", [])) or "no GPU"}']
  dirs = nvidia_library_dirs()
  lines.append(f'nvidia-* CUDA packages: {len(dirs)} library folders'
               + (f' ({os.path.dirname(os.path.dirname(dirs[0]))})' if dirs else ''))
  lines.append(f'preloaded: {len(found.libraries)} libraries'
               + (f', {len(found.failed)} failed' if found.failed else ''))
  lines += [f'  failed: {failure}' for failure in found.failed]
  gpus = tf.config.list_physical_devices('GPU')
  lines.append(f'CUDA libraries in this process: '
               f'{", ".join(os.path.basename(p) for p in loaded_cuda_libraries()) or "none"}')
  lines.append(f'CUDA driver: {found.driver_version or "none (no libcuda.so.1)"}')
  for gpu in found.gpus:
    major, minor = gpu.compute_capability
    lines.append(f'GPU {gpu.name}: compute capability {major}.{minor}, '
                 + ('needs PTX compilation at first start' if gpu.needs_ptx_compilation
                    else 'native kernels'))
  lines.append(f'GPUs TensorFlow sees: {len(gpus)}')
  advice = []
  if not dirs:
    advice.append('no nvidia-*-cu11 packages: `make install-gpu` installs TensorFlow\'s '
                  'CUDA 11.8 / cuDNN 8.7 libraries (requirements-gpu.lock)')
  if found.failed:
    advice.append('some CUDA libraries would not load (above): reinstall them with '
                  '`make install-gpu`')
  if found.driver_version is None:
    advice.append('no NVIDIA driver: a GPU needs its driver (libcuda.so.1) installed; '
                  'without one TensorFlow runs on the CPU')
  elif not found.gpus:
    advice.append('the driver sees no GPU (CUDA_VISIBLE_DEVICES, or the device is not '
                  'visible to this container)')
  elif not gpus:
    advice.append('the driver sees a GPU but TensorFlow does not: check that the CUDA '
                  'libraries above loaded and that the driver supports CUDA 11.8')
  if any(g.needs_ptx_compilation for g in found.gpus):
    advice.append(f'first start compiles kernels from PTX (30 minutes or more); they are '
                  f'kept in CUDA_CACHE_PATH={os.environ.get("CUDA_CACHE_PATH")}')
  if gpus:
    advice.append("GPUs train clients only with fl.client_runtime: tf (TFF's worker has no "
                  'CUDA)')
  lines += [f'advice: {line}' for line in advice] or ['advice: none, the GPU route is ready']
  return lines
