"""Progress lines for a stderr that is not a terminal (a log file, a pipe, CI).

The driver shows a tqdm bar on a terminal; elsewhere it prints one line on the first
round it runs, every ``ceil(rounds / 10)``-th round and the last:

  [fedavg seed 0] round 12/60  test acc 0.8123  4.1 s/round  ~3m 15s left
"""

import math
from typing import Optional


def is_logged(round_num: int, first: int, rounds: int) -> bool:
  """Whether ``round_num`` of ``rounds`` gets a line when this run started at ``first``."""
  return round_num in (first, rounds) or round_num % math.ceil(rounds / 10) == 0


def duration(seconds: float) -> str:
  """``45s``, ``3m 05s``, ``2h 07m``."""
  seconds = int(round(seconds))
  if seconds < 60:
    return f'{seconds}s'
  minutes, seconds = divmod(seconds, 60)
  if minutes < 60:
    return f'{minutes}m {seconds:02d}s'
  return f'{minutes // 60}h {minutes % 60:02d}m'


def line(label: str, round_num: int, rounds: int, seconds: list,
         accuracy: Optional[float] = None) -> str:
  """The line of ``round_num``; ``accuracy``: its test accuracy, if it was evaluated.

  ``seconds``: how long each round run in this process took, this one last (a resumed run
  counts its own). The first of them also traced and compiled the computations, so from
  the second on the estimate leaves it out: the mean of the others times the rounds left.
  """
  per_round = sum(seconds[1:]) / (len(seconds) - 1) if len(seconds) > 1 else seconds[0]
  left = rounds - round_num
  parts = [f'[{label}] round {round_num}/{rounds}']
  if accuracy is not None:
    parts.append(f'test acc {accuracy:.4f}')
  parts.append(f'{per_round:.1f} s/round')
  parts.append(f'~{duration(left * per_round)} left' if left else
               f'done in {duration(sum(seconds))}')
  return '  '.join(parts)
