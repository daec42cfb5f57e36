"""The benchmarks stop with one clear line when their Python cannot run them."""
import importlib.util
import os
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
