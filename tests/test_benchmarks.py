"""The benchmarks stop with one clear line when their Python cannot run them, and run."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

_GPU = os.path.join(os.path.dirname(__file__), '..', 'benchmarks', 'gpu.py')


def _load(path):
  spec = importlib.util.spec_from_file_location('benchmark_under_test', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_gpu_benchmark_names_the_missing_package_before_any_work(monkeypatch):
  gpu = _load(_GPU)
  monkeypatch.setattr(gpu, 'NEEDS', ('tensorflow', 'no_such_package_for_this_test'))
  monkeypatch.setattr(sys, 'argv', ['gpu.py'])
  monkeypatch.setattr(gpu.subprocess, 'run', lambda *a, **k: pytest.fail('work started'))
  with pytest.raises(SystemExit) as exit_info:
    gpu.main()
  message = str(exit_info.value.code)
  assert message.startswith('benchmarks/gpu.py: error: ')
  assert 'no_such_package_for_this_test' in message and 'tensorflow,' not in message
  assert '.venv/bin/python' in message


@pytest.mark.slow
def test_gpu_benchmark_runs_a_tiny_round_on_the_tf_runtime():
  """The path a GPU machine takes, on the CPU (tf-cpu runs the same code as tf-gpu)."""
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='-1')
  done = subprocess.run([sys.executable, _GPU, '--one', 'tf-cpu', '--clients', '2',
                         '--examples', '4', '--epochs', '1', '--batch-size', '4'],
                        env=env, capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  row = json.loads(done.stdout.strip().splitlines()[-1])
  assert row['variant'] == 'tf-cpu' and row['round_s'] > 0
  assert row['runtime']['client_runtime'] == 'tf'
