"""The GPU route on a CPU machine: libraries of nvidia-* packages loaded by path before
TensorFlow, the PTX cache for GPUs without native kernels, ``tff-noisy doctor``."""
import os
import subprocess
import sys
import textwrap

import pytest

from tff_noisy import cuda

_ROOT = os.path.join(os.path.dirname(__file__), '..')


@pytest.mark.parametrize('capability, compiles', [
    ((3, 5), False), ((6, 1), False), ((7, 0), False), ((7, 2), False), ((7, 5), False),
    ((8, 0), True), ((8, 6), True), ((8, 9), True), ((9, 0), True), ((3, 0), True)])
def test_which_gpus_need_ptx_compilation(capability, compiles):
  assert cuda.Gpu('x', capability).needs_ptx_compilation is compiles


def _fake_package(root, package, library):
  """site-packages/nvidia/<package>/lib/<library>, a real shared library built by cc."""
  lib = root / 'nvidia' / package / 'lib'
  lib.mkdir(parents=True)
  source = root / f'{package}.c'
  source.write_text('int tff_noisy_fake(void) { return 7; }\n')
  subprocess.run(['cc', '-shared', '-fPIC', '-o', str(lib / library), str(source)],
                 check=True)


def _in_a_new_process(site, code):
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), _ROOT]))
  env.pop('CUDA_CACHE_PATH', None)
  return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], env=env,
                        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='/proc/self/maps is Linux')
def test_the_libraries_load_by_path_at_the_first_tensorflow_import_not_at_ours(tmp_path):
  if subprocess.run(['which', 'cc'], capture_output=True, check=False).returncode:
    pytest.skip('no C compiler to build a stand-in library')
  _fake_package(tmp_path, 'cuda_runtime', 'libcudart.so.11.0')
  _fake_package(tmp_path, 'cudnn', 'libcudnn.so.8')
  # A stand-in TensorFlow, first on the path: it notes whether preload ran before it.
  (tmp_path / 'tensorflow').mkdir()
  (tmp_path / 'tensorflow' / '__init__.py').write_text(
      'from tff_noisy import cuda\nPRELOADED_BEFORE = cuda._done is not None\n')
  done = _in_a_new_process(tmp_path, '''
      import ctypes
      import sys
      opened = []  # Every library dlopened through ctypes, the CUDA driver's included.
      real_cdll = ctypes.CDLL
      ctypes.CDLL = lambda name, *args, **kwargs: (opened.append(name),
                                                   real_cdll(name, *args, **kwargs))[1]
      import tff_noisy
      import tff_noisy.methods
      import experiments.run  # The command line's modules too.
      from tff_noisy import cuda
      assert 'tensorflow' not in sys.modules
      print(cuda._done, opened, cuda.loaded_cuda_libraries())
      import tensorflow
      print(tensorflow.PRELOADED_BEFORE, [p.rsplit('/', 1)[-1] for p in cuda._done.libraries])
      print(sorted(p.rsplit('/', 1)[-1] for p in cuda.loaded_cuda_libraries()))
      print('libcuda.so.1' in opened)
  ''')
  assert done.returncode == 0, done.stderr
  imported, preloaded, mapped, driver_asked = done.stdout.strip().splitlines()
  assert imported == 'None [] []'  # import tff_noisy: no library loaded, no driver call.
  assert preloaded == "True ['libcudart.so.11.0', 'libcudnn.so.8']"  # The runtime first.
  assert mapped == "['libcudart.so.11.0', 'libcudnn.so.8']"
  assert driver_asked == 'True'  # The driver's GPUs (cuInit), once TensorFlow is imported.


def test_preload_runs_at_once_when_tensorflow_is_loaded_already(tmp_path):
  (tmp_path / 'tensorflow').mkdir()
  (tmp_path / 'tensorflow' / '__init__.py').write_text('')
  done = _in_a_new_process(tmp_path, '''
      import sys
      import tensorflow
      import tff_noisy
      from tff_noisy import cuda
      print(cuda._done is not None, any(isinstance(f, cuda._BeforeTensorFlow)
                                        for f in sys.meta_path))
  ''')
  assert done.returncode == 0, done.stderr
  assert done.stdout.split() == ['True', 'False']


def test_a_gpu_without_native_kernels_gets_a_persistent_kernel_cache(tmp_path, monkeypatch):
  monkeypatch.setattr(cuda, '_done', None)
  monkeypatch.setattr(cuda, 'nvidia_library_dirs', lambda: [])
  monkeypatch.setattr(cuda, 'driver_gpus', lambda: ('12.4', [cuda.Gpu('NVIDIA H200', (9, 0))]))
  monkeypatch.delenv('CUDA_CACHE_PATH', raising=False)
  monkeypatch.delenv('CUDA_CACHE_MAXSIZE', raising=False)
  said = []
  found = cuda.preload(cache_root=str(tmp_path), announce=said.append)
  assert found.cache_set and os.environ['CUDA_CACHE_PATH'] == str(tmp_path / 'cuda-ptx')
  assert int(os.environ['CUDA_CACHE_MAXSIZE']) >= 2**31
  assert len(said) == 1 and 'NVIDIA H200 (compute capability 9.0)' in said[0]
  assert '30 minutes' in said[0]

  monkeypatch.setattr(cuda, '_done', None)
  monkeypatch.setenv('CUDA_CACHE_PATH', '/mine')
  monkeypatch.setattr(cuda, 'driver_gpus', lambda: ('12.4', [cuda.Gpu('T4', (7, 5))]))
  assert not cuda.preload(announce=said.append).cache_set and len(said) == 1
  monkeypatch.setattr(cuda, '_done', None)


def test_doctor_on_a_machine_without_the_packages_says_how_to_install_them():
  done = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'tff-noisy'),
                         'doctor'], capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr
  out = done.stdout
  assert 'TensorFlow 2.14.1: CUDA 11.8' in out and 'GPUs TensorFlow sees: ' in out
  if not cuda.nvidia_library_dirs():
    assert 'advice: no nvidia-*-cu11 packages: `make install-gpu`' in out


@pytest.mark.slow
def test_the_gpu_lock_loads_in_a_venv_that_has_it():
  """Set TFF_NOISY_GPU_VENV to a venv with requirements.lock, requirements-gpu.lock and
  this project installed (what `make install-gpu` makes)."""
  venv = os.environ.get('TFF_NOISY_GPU_VENV')
  if not venv:
    pytest.skip('TFF_NOISY_GPU_VENV is not set: no venv with the nvidia-*-cu11 wheels here')
  code = textwrap.dedent('''
      import tff_noisy
      from tff_noisy import cuda
      import tensorflow as tf
      print(len(cuda.preload().libraries), len(cuda.preload().failed))
      print(' '.join(sorted(p.rsplit('/', 1)[-1] for p in cuda.loaded_cuda_libraries())))
      print(len(tf.config.list_physical_devices('GPU')), cuda.preload().driver_version)
  ''')
  done = subprocess.run([os.path.join(venv, 'bin', 'python'), '-c', code],
                        capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  counts, libraries, gpus = done.stdout.strip().splitlines()[-3:]
  loaded, failed = map(int, counts.split())
  assert loaded >= 10 and failed == 0, done.stdout
  for name in ('libcudart.so.11.0', 'libcublas.so.11', 'libcudnn.so.8', 'libcufft.so.10'):
    assert name in libraries.split()
  if gpus.split()[1] == 'None':  # No driver: TensorFlow reports no GPU, no crash.
    assert gpus.split()[0] == '0'
