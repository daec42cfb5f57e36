"""FedEFC's prestopping monitor: the patience rule of the paper's §3.1, with the first
monitored round of the released code (t > t_mon + 1) or of the paper (t > t_mon)."""

import pytest

from tff_noisy.ops import prestop


def _run(signals, **kwargs):
  monitor, history = prestop.Monitor(), []
  for round_num, signal in enumerate(signals, start=1):
    monitor = prestop.step(monitor, signal, round_num, **kwargs)
    history.append(monitor)
  return history


@pytest.mark.parametrize('monitor_from', ['code', 'paper'])
@pytest.mark.parametrize('gamma', [1, 2, 3, 5])
def test_switches_exactly_after_gamma_non_improving_rounds(gamma, monitor_from):
  # t_mon = 2: rounds 1-2 unmonitored and falling (and round 3 too with ``code``); 3-5
  # improve; then a plateau with one dip, none beating round 5's 0.6. Round 4 beats round
  # 3 either way, so both readings switch at round 5 + gamma.
  signals = [0.9, 0.1, 0.4, 0.5, 0.6, 0.6, 0.55, 0.59, 0.6, 0.58, 0.6, 0.3]
  history = _run(signals, t_mon=2, gamma=gamma, rule='best', monitor_from=monitor_from)
  expected = 5 + gamma
  assert [m.switch_round for m in history].count(-1) == expected - 1
  assert history[expected - 1].switch_round == expected
  assert [m.count for m in history[:expected]] == [0] * 5 + list(range(1, gamma + 1))
  assert all(m.switched and m.switch_round == expected for m in history[expected - 1:])
  assert history[-1] == history[expected - 1]  # Frozen once switched.
  assert history[4].best == 0.6 and history[1].best == 0.0  # Unmonitored rounds: no best.


def test_an_improvement_resets_the_counter():
  signals = [0.5, 0.4, 0.6, 0.5, 0.55]
  history = _run(signals, t_mon=0, gamma=2, rule='best', monitor_from='paper')
  assert [m.count for m in history] == [0, 1, 0, 1, 2]
  assert [m.switch_round for m in history] == [-1, -1, -1, -1, 5]
  # ``code`` reads from round 2: 0.4 is then the first best (it beats the start, 0).
  history = _run(signals, t_mon=0, gamma=2, rule='best')
  assert [m.count for m in history] == [0, 0, 0, 1, 2]


def test_previous_rule_compares_with_the_last_round():
  signals = [0.5, 0.6, 0.55, 0.58, 0.57, 0.56]
  previous = _run(signals, t_mon=1, gamma=2, rule='previous', monitor_from='paper')
  assert [m.count for m in previous] == [0, 0, 1, 0, 1, 2]
  assert previous[-1].switch_round == 6
  best = _run(signals, t_mon=1, gamma=2, rule='best', monitor_from='paper')
  assert best[3].switch_round == 4  # 0.58 does not beat 0.6.


def test_the_code_and_the_paper_start_monitoring_one_round_apart():
  # t_mon = 3, gamma = 2, rule best. ``paper`` reads rounds 4 on: round 4's 0.7 is the
  # best, rounds 5 (0.5) and 6 (0.6) do not beat it, so T_e = 6. ``code`` reads rounds 5
  # on ([code]: rnd > start_monitor, rnd = t - 1): 0.5, 0.6 and 0.65 each beat the best
  # so far, round 8's 0.6 and round 9's 0.62 do not, so T_e = 9.
  signals = [0.2, 0.3, 0.4, 0.7, 0.5, 0.6, 0.65, 0.6, 0.62, 0.9]
  paper = _run(signals, t_mon=3, gamma=2, monitor_from='paper')
  assert [m.count for m in paper[:6]] == [0, 0, 0, 0, 1, 2]
  assert [m.switch_round for m in paper] == [-1] * 5 + [6] * 5
  assert paper[-1].best == 0.7
  code = _run(signals, t_mon=3, gamma=2, monitor_from='code')
  assert [m.count for m in code[:9]] == [0, 0, 0, 0, 0, 0, 0, 1, 2]
  assert [m.best for m in code[:5]] == [0.0, 0.0, 0.0, 0.0, 0.5]  # Round 4 unread.
  assert [m.switch_round for m in code] == [-1] * 8 + [9] * 2
  assert _run(signals, t_mon=3, gamma=2) == code  # ``code`` is the default.
  assert prestop.first_monitored_round(3) == 5
  assert prestop.first_monitored_round(3, 'paper') == 4


def test_a_round_without_signal_changes_nothing_and_bad_arguments_raise():
  monitor = prestop.Monitor(best=0.5, previous=0.4, count=1)
  assert prestop.step(monitor, None, 7, t_mon=2, gamma=3) == monitor
  with pytest.raises(ValueError, match='rule must be one of best, previous'):
    prestop.step(monitor, 0.3, 7, t_mon=2, gamma=3, rule='last')
  with pytest.raises(ValueError, match='gamma must be >= 1'):
    prestop.step(monitor, 0.3, 7, t_mon=2, gamma=0)
  with pytest.raises(ValueError, match="monitor_from must be one of code, paper, got 'zero'"):
    prestop.step(monitor, 0.3, 7, t_mon=2, gamma=3, monitor_from='zero')
