"""``driver.Simulation``: a run assembled once and stepped a round at a time."""
import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy.simulation import driver


def _config(rounds=4):
  return config_lib.from_dict({
      'seed': 5, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 4},
      'noise': {'name': 'symmetric', 'rate': 0.3, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp', 'width': 16},
      'fl': {'rounds': rounds, 'participation': 0.5, 'batch_size': 32, 'client_lr': 0.1,
             'client_runtime': 'tf'}})


def test_rounds_need_prepare_first_and_resume_comes_before_them(tmp_path, tmp_cache):
  simulation = driver.Simulation(_config())
  assert (simulation.next_round, simulation.done) == (1, False)
  with pytest.raises(RuntimeError, match='prepare'):
    simulation.run_round()
  simulation.prepare()
  record = simulation.run_round()
  assert record['round'] == 1 and simulation.history == [record]
  assert len(record['clients']) == 2 and 'test_accuracy' in record
  with pytest.raises(RuntimeError, match='resume_from comes before'):
    simulation.resume_from(str(tmp_path))


@pytest.mark.slow
def test_a_checkpoint_and_a_new_simulation_continue_the_run_exactly(tmp_path, tmp_cache):
  """Crash + resume without faking a crash: k rounds, a checkpoint, a new engine."""
  uninterrupted = driver.Simulation(_config())
  uninterrupted.prepare()
  while not uninterrupted.done:
    uninterrupted.run_round()
  first = driver.Simulation(_config())
  first.prepare()
  first.run_round()
  first.run_round()
  first.save_checkpoint(str(tmp_path))
  second = driver.Simulation(_config())
  assert second.resume_from(str(tmp_path)) and second.next_round == 3
  second.prepare()
  while not second.done:
    second.run_round()
  keys = ('clients', 'train_loss', 'test_accuracy')
  assert [{k: r[k] for k in keys} for r in second.history] == [
      {k: r[k] for k in keys} for r in uninterrupted.history]
  for ours, theirs in zip(second.final_weights(), uninterrupted.final_weights()):
    np.testing.assert_array_equal(ours, theirs)
  assert [p['rounds'] for p in second.results().runtime_parts] == [[1, 2], [3, 4]]
