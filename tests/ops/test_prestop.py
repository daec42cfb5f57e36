"""FedEFC's prestopping monitor: the patience rule of the paper's §3.1."""

import pytest

from tff_noisy.ops import prestop


def _run(signals, **kwargs):
  monitor, history = prestop.Monitor(), []
  for round_num, signal in enumerate(signals, start=1):
    monitor = prestop.step(monitor, signal, round_num, **kwargs)
    history.append(monitor)
  return history


@pytest.mark.parametrize('gamma', [1, 2, 3, 5])
def test_switches_exactly_after_gamma_non_improving_rounds(gamma):
  # Rounds 1-2 unmonitored (t_mon = 2) and falling; 3-5 improve; then a plateau with one
  # dip, none beating round 5's 0.6.
  signals = [0.9, 0.1, 0.4, 0.5, 0.6, 0.6, 0.55, 0.59, 0.6, 0.58, 0.6, 0.3]
  history = _run(signals, t_mon=2, gamma=gamma, rule='best')
  expected = 5 + gamma
  assert [m.switch_round for m in history].count(-1) == expected - 1
  assert history[expected - 1].switch_round == expected
  assert [m.count for m in history[:expected]] == [0] * 5 + list(range(1, gamma + 1))
  assert all(m.switched and m.switch_round == expected for m in history[expected - 1:])
  assert history[-1] == history[expected - 1]  # Frozen once switched.
  assert history[4].best == 0.6 and history[1].best == 0.0  # Unmonitored rounds: no best.


def test_an_improvement_resets_the_counter():
  history = _run([0.5, 0.4, 0.6, 0.5, 0.55], t_mon=0, gamma=2, rule='best')
  assert [m.count for m in history] == [0, 1, 0, 1, 2]
  assert [m.switch_round for m in history] == [-1, -1, -1, -1, 5]


def test_previous_rule_compares_with_the_last_round():
  signals = [0.5, 0.6, 0.55, 0.58, 0.57, 0.56]
  previous = _run(signals, t_mon=1, gamma=2, rule='previous')
  assert [m.count for m in previous] == [0, 0, 1, 0, 1, 2]
  assert previous[-1].switch_round == 6
  best = _run(signals, t_mon=1, gamma=2, rule='best')
  assert best[3].switch_round == 4  # 0.58 does not beat 0.6.


def test_a_round_without_signal_changes_nothing_and_bad_arguments_raise():
  monitor = prestop.Monitor(best=0.5, previous=0.4, count=1)
  assert prestop.step(monitor, None, 7, t_mon=2, gamma=3) == monitor
  with pytest.raises(ValueError, match='rule must be one of best, previous'):
    prestop.step(monitor, 0.3, 7, t_mon=2, gamma=3, rule='last')
  with pytest.raises(ValueError, match='gamma must be >= 1'):
    prestop.step(monitor, 0.3, 7, t_mon=2, gamma=0)
