"""The driver resumes only its own run: another seed is refused; rounds may grow only."""
import pytest

from tff_noisy import config as config_lib
from tff_noisy.simulation import checkpoint
from tff_noisy.simulation import driver


def _config(rounds, seed=3):
  return config_lib.from_dict({
      'seed': seed, 'data': {'dataset': 'digits'}, 'partition': {'num_clients': 4},
      'fl': {'rounds': rounds, 'participation': 0.5, 'checkpoint_every': 2}})


@pytest.mark.slow
def test_resume_refuses_another_run_and_extends_its_own(tmp_path, tmp_cache):
  out = str(tmp_path)
  driver.run_experiment(_config(2), out)
  with pytest.raises(checkpoint.CheckpointError, match='seed: checkpoint 3, this run 4'):
    driver.run_experiment(_config(2, seed=4), out, resume=True)
  longer = driver.run_experiment(_config(3), out, resume=True)
  assert [r['round'] for r in longer.rounds] == [1, 2, 3]
  with pytest.raises(checkpoint.CheckpointError, match='cannot be shortened'):
    driver.run_experiment(_config(2), out, resume=True)
