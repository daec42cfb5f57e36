"""tff-noisy: federated learning with noisy labels on TensorFlow Federated.

The public API (``docs/python-api.md``); importing the package loads no TensorFlow, the
names below load it when first used::

    import tff_noisy
    data = tff_noisy.federated_data({'a': (x_a, y_a), 'b': (x_b, y_b)}, test=(x, y))
    process = tff_noisy.build('fedefc', model_fn=model_fn, data=data, rounds=30)
    results = tff_noisy.run({'method': {'name': 'fedln'}}, data=data, model_fn=model_fn)
"""

import importlib

from tff_noisy import cuda as _cuda

__version__ = "0.1.0"
# The nvidia-* wheels' CUDA libraries, loaded at the first `import tensorflow`, before it.
_cuda.preload_before_tensorflow()

# Public name -> the module that defines it.
_API = {
    'federated_data': 'tff_noisy.api',
    'federated_data_from_client_data': 'tff_noisy.api',
    'add_noise': 'tff_noisy.api',
    'NoisyLabels': 'tff_noisy.api',
    'build': 'tff_noisy.api',
    'Process': 'tff_noisy.api',
    'ProcessState': 'tff_noisy.api',
    'RoundOutput': 'tff_noisy.api',
    'run': 'tff_noisy.api',
    'compare': 'tff_noisy.api',
    'export': 'tff_noisy.api',
    'load_config': 'tff_noisy.api',
    'Results': 'tff_noisy.simulation.results',
    'ExperimentConfig': 'tff_noisy.config',
    'NoiseConfig': 'tff_noisy.config',
    'ConfigError': 'tff_noisy.errors',
    'register_method': 'tff_noisy.methods',
    'register_model': 'tff_noisy.zoo',
}
_RENAMED = {'register_method': 'register', 'register_model': 'register'}
__all__ = sorted(_API) + ['aggregators']


def __getattr__(name: str):
  if name == 'aggregators':
    return importlib.import_module('tff_noisy.aggregators')
  if name not in _API:
    raise AttributeError(f"module 'tff_noisy' has no attribute {name!r}")
  value = getattr(importlib.import_module(_API[name]), _RENAMED.get(name, name))
  globals()[name] = value
  return value


def __dir__():
  return __all__
