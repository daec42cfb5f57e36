"""FedEFC's prestopping monitor: a patience rule on the clients' mean noisy-label accuracy.

FedEFC §3.1 (docs/papers/fedefc.md, ambiguities 2 and 13). Rounds are numbered from 1.
The rule reads the rounds t > t_mon + 1 (``monitor_from: code``, the default: [code] tests
``rnd > start_monitor`` on rounds numbered from 0) or t > t_mon (``paper``: Algorithm 1's
test on rounds numbered from 1). A round improves when its signal A(t) beats the best
value so far (``best``, [code], the default; the best starts at 0) or the previous round's
value (``previous``, the paper's literal rule). An improving round resets the counter c,
any other adds 1; the round where c reaches gamma is the prestopping point T_e, after
which training switches to the corrected phase (it does not stop). Plain Python, so the
server's decision is a handful of numbers that the process state (and hence a
checkpoint) carries.
"""

import dataclasses
from typing import Optional

RULES = ('best', 'previous')
MONITOR_FROM = ('code', 'paper')


@dataclasses.dataclass(frozen=True)
class Monitor:
  best: float = 0.0  # A*: the best monitored signal so far.
  previous: float = 0.0  # A(t - 1), every round's signal (monitored or not).
  count: int = 0  # c: monitored rounds since the last improvement.
  switch_round: int = -1  # T_e once the rule has fired; -1 before.

  @property
  def switched(self) -> bool:
    return self.switch_round >= 0


def first_monitored_round(t_mon: int, monitor_from: str = 'code') -> int:
  """The first round (numbered from 1) the rule reads: t_mon + 2 [code], t_mon + 1
  (the paper's t > t_mon)."""
  if monitor_from not in MONITOR_FROM:
    raise ValueError(f"monitor_from must be one of {', '.join(MONITOR_FROM)}, got "
                     f'{monitor_from!r}')
  return t_mon + (2 if monitor_from == 'code' else 1)


def step(monitor: Monitor, signal: Optional[float], round_num: int, *, t_mon: int,
         gamma: int, rule: str = 'best', monitor_from: str = 'code') -> Monitor:
  """The monitor after round ``round_num`` with signal A(t); unchanged once switched.

  A round without a signal (no client's update was finite) changes nothing.
  """
  if rule not in RULES:
    raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
  if gamma < 1:
    raise ValueError(f'gamma must be >= 1, got {gamma}')
  first = first_monitored_round(t_mon, monitor_from)
  if monitor.switched or signal is None:
    return monitor
  best, count, switch_round = monitor.best, monitor.count, monitor.switch_round
  if round_num >= first:
    reference = best if rule == 'best' else monitor.previous
    if signal > reference:
      best, count = max(best, signal), 0
    else:
      count += 1
    if count >= gamma:
      switch_round = round_num
  return Monitor(best=best, previous=signal, count=count, switch_round=switch_round)
