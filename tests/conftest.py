"""Shared test set-up: quiet TensorFlow logs, and no TFF worker left behind."""
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')

import pytest  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='session', autouse=True)
def _stop_tff_workers():
  yield
  from tff_noisy import tff_runtime  # pylint: disable=g-import-not-at-top
  tff_runtime.shutdown_workers()


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
  """A private federated-data cache directory."""
  cache = tmp_path / 'cache'
  monkeypatch.setenv('TFF_NOISY_CACHE', str(cache))
  return cache
