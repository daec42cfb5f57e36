"""TensorFlow's start-up log and library warnings are hidden unless --verbose."""
import os
import subprocess
import sys

import pytest

_ROOT = os.path.join(os.path.dirname(__file__), '..')
_DEMO = os.path.join(_ROOT, 'experiments', 'configs', 'demo.yaml')
# Runs a command that loads no TensorFlow, then what run, export and embed do next:
# import TensorFlow and emit the kinds of output the CLI hides.
_CHILD = """
import os, sys, warnings
from experiments import run
from tff_noisy import errors
at_start = 'tensorflow' in sys.modules
run.main(sys.argv[1:])
at_end = 'tensorflow' in sys.modules
import tensorflow as tf
tf.get_logger().warning('a TensorFlow Python log line')
for module in ('tensorflow.lite.python.convert', 'tensorflow_federated.python.core'):
  warnings.warn_explicit(f'a library warning from {module}', UserWarning, 'x.py', 1,
                         module=module)
warnings.warn('a deprecation', DeprecationWarning)
errors.warn('a warning a person can act on')
print(at_start, at_end, os.environ['TF_CPP_MIN_LOG_LEVEL'])
"""
_HIDDEN = ('a TensorFlow Python log line', 'a library warning from tensorflow.lite',
           'a library warning from tensorflow_federated', 'a deprecation')


_BUILD = ['data', 'build', _DEMO, '--set', 'partition.num_clients=3']


def _run(tmp_path, argv) -> subprocess.CompletedProcess:
  env = dict(os.environ, TFF_NOISY_CACHE=str(tmp_path / 'cache'))
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)  # The tests' conftest sets one.
  return subprocess.run([sys.executable, '-c', _CHILD, *argv], capture_output=True,
                        text=True, timeout=120, cwd=_ROOT, env=env, check=True)


def test_quiet_by_default(tmp_path):
  done = _run(tmp_path, _BUILD)
  # TensorFlow was not loaded before the settings were made, and they held.
  assert done.stdout.splitlines()[-1] == 'False False 3'
  for chatter in ('cuDNN', 'cuFFT', 'cuBLAS', 'tensorflow/') + _HIDDEN:
    assert chatter not in done.stderr
  assert 'tff-noisy: warning: a warning a person can act on' in done.stderr


@pytest.mark.parametrize('argv', [['--verbose'] + _BUILD, _BUILD + ['--verbose']])
def test_verbose_hides_nothing(tmp_path, argv):
  done = _run(tmp_path, argv)
  assert done.stdout.splitlines()[-1] == 'False False 0'
  for shown in _HIDDEN + ('tff-noisy: warning: a warning a person can act on',):
    assert shown in done.stderr
