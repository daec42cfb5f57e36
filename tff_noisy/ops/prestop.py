"""FedEFC's prestopping monitor: a patience rule on the clients' mean noisy-label accuracy.

FedEFC §3.1 (docs/papers/fedefc.md, ambiguity 2): only rounds t > t_mon are monitored.
A round improves when its signal A(t) beats the best value so far (``best``, [code], the
default; the best starts at 0) or the previous round's value (``previous``, the paper's
literal rule). An improving round resets the counter c, any other adds 1; the round
where c reaches gamma is the prestopping point T_e, after which training switches to the
corrected phase (it does not stop). Plain Python, so the server's decision is a handful
of numbers that the process state (and hence a checkpoint) carries.
"""

import dataclasses
from typing import Optional

RULES = ('best', 'previous')


@dataclasses.dataclass(frozen=True)
class Monitor:
  best: float = 0.0  # A*: the best monitored signal so far.
  previous: float = 0.0  # A(t - 1), every round's signal (monitored or not).
  count: int = 0  # c: monitored rounds since the last improvement.
  switch_round: int = -1  # T_e once the rule has fired; -1 before.

  @property
  def switched(self) -> bool:
    return self.switch_round >= 0


def step(monitor: Monitor, signal: Optional[float], round_num: int, *, t_mon: int,
         gamma: int, rule: str = 'best') -> Monitor:
  """The monitor after round ``round_num`` with signal A(t); unchanged once switched.

  A round without a signal (no client's update was finite) changes nothing.
  """
  if rule not in RULES:
    raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
  if gamma < 1:
    raise ValueError(f'gamma must be >= 1, got {gamma}')
  if monitor.switched or signal is None:
    return monitor
  best, count, switch_round = monitor.best, monitor.count, monitor.switch_round
  if round_num > t_mon:
    reference = best if rule == 'best' else monitor.previous
    if signal > reference:
      best, count = max(best, signal), 0
    else:
      count += 1
    if count >= gamma:
      switch_round = round_num
  return Monitor(best=best, previous=signal, count=count, switch_round=switch_round)
