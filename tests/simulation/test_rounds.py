"""A round trains with Python's cyclic garbage collector paused, and leaves it as it was."""

import gc
import types

import pytest

from tff_noisy.simulation import rounds


@pytest.fixture
def collector_enabled():
  was = gc.isenabled()
  gc.enable()
  yield
  if not was:
    gc.disable()


def test_collector_paused_in_the_block_and_back_after(collector_enabled):
  with rounds.collector_paused():
    assert not gc.isenabled()
  assert gc.isenabled()


def test_collector_back_after_an_error(collector_enabled):
  with pytest.raises(KeyError):
    with rounds.collector_paused():
      raise KeyError('x')
  assert gc.isenabled()


def test_collector_left_off_when_it_was_off(collector_enabled):
  gc.disable()
  with rounds.collector_paused():
    pass
  assert not gc.isenabled()


class _Stop(Exception):
  pass


def test_train_runs_the_process_with_the_collector_paused(collector_enabled):
  seen = []

  def next_(*args, **kwargs):
    seen.append(gc.isenabled())
    raise _Stop

  recipe = types.SimpleNamespace(schedule=types.SimpleNamespace(groups=None), weighting=None)
  process = types.SimpleNamespace(next=next_)
  with pytest.raises(_Stop):
    rounds.train(recipe, process, 1, None, {'a': None}, [()], None, None)
  assert seen == [False] and gc.isenabled()
