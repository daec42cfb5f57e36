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


@pytest.fixture
def killed_after_round(monkeypatch):
  """``killed_after_round(n, run)``: calls ``run()`` with ``checkpoint.save`` raising
  ``KeyboardInterrupt`` right after round ``n`` is saved (a simulated kill), expects the
  interruption, then restores ``checkpoint.save``."""
  from tff_noisy.simulation import checkpoint  # pylint: disable=g-import-not-at-top

  def kill(round_to_kill, run):
    real_save = checkpoint.save

    def save_then_kill(directory, round_num, *args):
      real_save(directory, round_num, *args)
      if round_num == round_to_kill:
        raise KeyboardInterrupt('simulated kill')

    monkeypatch.setattr(checkpoint, 'save', save_then_kill)
    try:
      with pytest.raises(KeyboardInterrupt):
        run()
    finally:
      monkeypatch.setattr(checkpoint, 'save', real_save)

  return kill
