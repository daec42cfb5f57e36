"""Progress lines when stderr is not a terminal: which rounds, the estimate, the format."""
import pytest

from tff_noisy import config as config_lib
from tff_noisy.simulation import progress


def _logged(first: int, rounds: int) -> list:
  return [r for r in range(first, rounds + 1) if progress.is_logged(r, first, rounds)]


@pytest.mark.parametrize('first, rounds, logged', [
    (1, 1, [1]),
    (1, 7, [1, 2, 3, 4, 5, 6, 7]),
    (1, 60, [1, 6, 12, 18, 24, 30, 36, 42, 48, 54, 60]),
    (1, 100, [1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]),
    (31, 60, [31, 36, 42, 48, 54, 60]),  # Resumed: its first round, then every 6th.
    (55, 60, [55, 60]),
    (60, 60, [60]),
])
def test_logged_rounds(first, rounds, logged):
  assert _logged(first, rounds) == logged


@pytest.mark.parametrize('seconds, text', [
    (0, '0s'), (59.4, '59s'), (59.6, '1m 00s'), (195, '3m 15s'), (3599, '59m 59s'),
    (3600, '1h 00m'), (7620, '2h 07m'),
])
def test_duration(seconds, text):
  assert progress.duration(seconds) == text


def test_line_estimates_the_rest_from_the_mean_round_after_the_first():
  # The first round (30 s) also compiled; the next 11 took 4.1 s each; 48 left: 196.8 s.
  assert progress.line('fedavg seed 0', 12, 60, [30.0] + [4.1] * 11, 0.81234) == (
      '[fedavg seed 0] round 12/60  test acc 0.8123  4.1 s/round  ~3m 17s left')


def test_first_line_estimates_from_the_first_round():
  assert progress.line('fedavg seed 0', 1, 60, [2.0]) == (
      '[fedavg seed 0] round 1/60  2.0 s/round  ~1m 58s left')


def test_line_of_a_resumed_run_counts_only_its_own_rounds():
  # Resumed at round 31: its rounds took 20 s, then 5 s each; 20 left.
  assert progress.line('fedln seed 2', 40, 60, [20.0] + [5.0] * 9) == (
      '[fedln seed 2] round 40/60  5.0 s/round  ~1m 40s left')


def test_last_line_says_how_long_it_took():
  assert progress.line('fedavg seed 0', 60, 60, [30.0] + [4.0] * 59, 0.9) == (
      '[fedavg seed 0] round 60/60  test acc 0.9000  4.0 s/round  done in 4m 26s')


@pytest.mark.slow
def test_driver_prints_the_lines_when_stderr_is_not_a_terminal(tmp_path, tmp_cache, capfd):
  from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
  config = config_lib.from_dict({
      'seed': 1, 'data': {'dataset': 'digits'}, 'partition': {'num_clients': 2},
      'fl': {'rounds': 3, 'eval_every': 2}})
  driver.run_experiment(config, str(tmp_path / 'a'))
  lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith('[')]
  assert [line.split('  ')[0] for line in lines] == [
      f'[fedavg seed 1] round {r}/3' for r in (1, 2, 3)]
  assert 'test acc' not in lines[0] and 'test acc' in lines[1]  # Round 1 is not evaluated.
  assert lines[0].endswith(' left') and ' done in ' in lines[2]
  driver.run_experiment(config, str(tmp_path / 'b'), progress=False)
  assert '[fedavg' not in capfd.readouterr().err
