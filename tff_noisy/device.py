"""Where a run's TensorFlow work goes: the config's ``device`` applied and recorded.

``auto`` uses the GPUs TensorFlow sees (memory growth on), else the CPU; ``gpu`` is a
:class:`ConfigError` when TensorFlow sees none; ``cpu`` hides them. TF-free at import:
the command line calls :func:`hide_gpus_before_tensorflow` before TensorFlow loads, the
driver calls :func:`select` before any TensorFlow op runs.

TFF 0.87 runs every federated computation (client training, aggregation) in its C++
``worker_binary``, which is built without CUDA (it carries TensorFlow's "not compiled with
CUDA" message and none of the CUDA driver, cuBLAS or cuDNN symbols that the Python
package's libtensorflow_framework has): with ``fl.client_runtime: tff`` client updates run
on the CPU whatever the setting. A GPU serves the driver's own TensorFlow work: with
``fl.client_runtime: tf`` the clients' training and the in-process aggregation
(``tff_noisy.runtime``), and always the evaluation of the global model and the methods'
Python-side steps (their ``prepare`` and per-round reports).
"""

import os
import sys

from tff_noisy.errors import ConfigError

DEVICES = ('auto', 'cpu', 'gpu')
# Where TFF's worker runs the federated computations (see the module docstring).
TFF_WORKER_DEVICE = 'cpu'


def hide_gpus_before_tensorflow(requested: str) -> bool:
  """For ``cpu`` while TensorFlow is not loaded: hides the GPUs from it (and from the TFF
  worker, which inherits the environment) with ``CUDA_VISIBLE_DEVICES``; True if it did."""
  if requested != 'cpu' or 'tensorflow' in sys.modules:
    return False
  os.environ['CUDA_VISIBLE_DEVICES'] = '-1'
  return True


def select(requested: str) -> dict:
  """Applies ``requested`` to TensorFlow; returns the record results.json keeps:
  ``{requested, used, gpus (names of the GPUs used), tff_worker}``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  record = {'requested': requested, 'used': 'cpu', 'gpus': [],
            'tff_worker': TFF_WORKER_DEVICE}
  if requested == 'cpu':
    try:
      tf.config.set_visible_devices([], 'GPU')  # A no-op when there is none.
    except RuntimeError:
      raise ConfigError(
          'device: cpu cannot hide the GPUs that TensorFlow already uses in this process '
          '(an earlier run in it used them); run it in a process of its own or with '
          'CUDA_VISIBLE_DEVICES=-1') from None
    return record
  gpus = tf.config.get_visible_devices('GPU')  # Not those an earlier cpu run hid.
  if not gpus:
    if requested == 'gpu':
      hidden = os.environ.get('CUDA_VISIBLE_DEVICES')
      note = '' if hidden is None else f' (CUDA_VISIBLE_DEVICES={hidden!r})'
      raise ConfigError(f'device: gpu, but TensorFlow sees no GPU{note}; use device: auto '
                        '(a GPU when there is one) or cpu')
    return record
  for gpu in gpus:
    try:
      tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError:
      pass  # TensorFlow already started in this process: its GPU memory is set.
  names = [tf.config.experimental.get_device_details(gpu).get('device_name', gpu.name)
           for gpu in gpus]
  return {**record, 'used': 'gpu', 'gpus': names}
