"""Everything ``tff-noisy report`` writes, in one package; never TensorFlow.

- this module: the building blocks, a run as the report sees it (:class:`Run`), the
  Markdown writer, number formats, figures (matplotlib's Agg, imported only to draw) and
  :class:`Section`, the part of the report a method's diagnostics render (each method
  folder's ``report.py`` holds its sections, listed in its registry entry);
- ``report``: the report of a run, compare or grid directory (``write_report``);
- ``paper_table``: a reproduced table beside the paper's numbers (``tff-noisy
  reproduce``'s grids).
"""

import dataclasses
import io
import math
import os
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from tff_noisy import files


@dataclasses.dataclass
class Run:
  """One run directory of the report."""
  path: str                 # Relative to the report directory ('.' for a single run).
  method: str
  setting: Optional[str]    # The grid setting's directory name; None outside a grid.
  seed: Optional[int]
  results: Optional[dict]   # None: no results.json (running or interrupted).
  checkpoint_round: Optional[int] = None
  lock: Optional[str] = None

  @property
  def finished(self) -> bool:
    return self.results is not None


def seed_label(run: Run) -> str:
  return f'seed {run.seed}' if run.seed is not None else run.method


class Writer:
  """Collects report lines and the figures written."""

  def __init__(self, directory: str):
    self.directory = directory
    self.lines: List[str] = []
    self.figures: List[str] = []

  def add(self, *lines: str) -> None:
    self.lines.extend(lines)

  def table(self, header: List[str], rows: List[List[str]]) -> None:
    self.add('| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header))
    self.add(*('| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows))
    self.add('')

  def figure(self, name: str, alt: str) -> str:
    """The path to draw ``name`` into; adds its (relative) image link."""
    self.figures.append(name)
    self.add(f'![{alt}]({name})', '')
    return os.path.join(self.directory, name)

  def figures_after(self, figures) -> None:
    """Each (caption, draw(path), name, alt): the caption, then the figure drawn."""
    for caption, draw, name, alt in figures:
      self.add(caption, '')
      draw(path=self.figure(name, alt))


def pearson(x, y) -> Optional[float]:
  """Pearson correlation; None with fewer than 2 points or a constant side."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if len(x) < 2 or x.std() == 0 or y.std() == 0:
    return None
  return float(np.corrcoef(x, y)[0, 1])


def mean_std(values) -> Optional[Tuple[float, float, int]]:
  """Mean and population std (as grid.csv) of the values that are not None."""
  values = [v for v in values if v is not None]
  if not values:
    return None
  return float(np.mean(values)), float(np.std(values)), len(values)


def pct(stats) -> str:
  if stats is None:
    return 'n/a'
  mean, std, n = stats
  return f'{100 * mean:.2f} ± {100 * std:.2f}' if n > 1 else f'{100 * mean:.2f}'


def num(value, digits=3) -> str:
  if value is None or (isinstance(value, float) and not math.isfinite(value)):
    return 'n/a'
  if isinstance(value, bool) or isinstance(value, int):
    return str(value)
  if isinstance(value, float):
    return f'{value:.{digits}f}'
  return str(value)


def scalars(values: dict) -> str:
  return ', '.join(f'{k} {num(v)}' for k, v in values.items()
                   if v is None or isinstance(v, (int, float, str)))


def client_values(records, key) -> Dict[str, float]:
  """Per-client mean over the rounds of a ``{client: value}`` diagnostic."""
  sums, counts = {}, {}
  for record in records:
    for cid, value in (record.get(key) or {}).items():
      if value is not None:
        sums[cid] = sums.get(cid, 0.0) + float(value)
        counts[cid] = counts.get(cid, 0) + 1
  return {cid: sums[cid] / counts[cid] for cid in sorted(sums)}


def relative_weights(rounds: List[Dict[str, float]]) -> Dict[str, float]:
  """Each client's aggregation weight over the mean of its round's, averaged over the
  ``rounds`` (``{client: weight}`` each) it took part in."""
  relative = []
  for weights in rounds:
    values = [float(w) for w in weights.values() if w is not None]
    mean = float(np.mean(values)) if values else 0.0
    if mean > 0:
      relative.append({cid: float(w) / mean for cid, w in weights.items() if w is not None})
  return client_values([{'w': r} for r in relative], 'w')


def weights_estimate(rounds: List[Dict[str, float]]) -> List['Estimate']:
  """The relative aggregation weights of ``rounds`` as an estimate (none if empty)."""
  weights = relative_weights(rounds)
  if not weights:
    return []
  return [Estimate('weights', 'relative aggregation weight',
                   'weight / mean weight of its round, mean over rounds', weights)]


@dataclasses.dataclass
class Estimate:
  """A per-client quantity a method estimated, to compare with the true noise rates."""
  key: str
  label: str
  where: str
  values: Dict[str, float]
  recorded: Optional[Tuple[str, float]] = None  # (what, value) the run itself recorded.
  diagonal: bool = False  # Its scatter draws y = x (an estimate of the noise rate itself).


def pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def slug(*parts) -> str:
  text = '-'.join(str(p) for p in parts if p not in (None, ''))
  return re.sub(r'[^A-Za-z0-9._-]+', '_', text)


def save(fig, path: str) -> None:
  """Writes ``fig`` as the PNG ``path``, whole or not at all (``files.write_file``)."""
  fig.tight_layout()
  content = io.BytesIO()
  fig.savefig(content, format='png', dpi=100)
  pyplot().close(fig)
  files.write_file(path, content.getvalue())


def plot_scatter(points: Dict[str, Tuple[list, list]], xlabel: str, ylabel: str,
                 title: str, path: str, diagonal: bool) -> None:
  """One series per label (a seed); ``diagonal`` draws y = x."""
  plt = pyplot()
  fig, ax = plt.subplots(figsize=(5, 4))
  for label, (x, y) in points.items():
    ax.scatter(x, y, s=18, alpha=0.75, label=label)
  if diagonal:
    values = [v for x, y in points.values() for v in list(x) + list(y)]
    low, high = min(values + [0.0]), max(values + [1e-9])
    ax.plot([low, high], [low, high], color='gray', linestyle='--', linewidth=1)
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=10)
  ax.grid(alpha=0.3)
  if points:
    ax.legend(fontsize=8)
  save(fig, path)


class Section:
  """How a method's diagnostics appear in the report; a method lists its sections in its
  registry entry (``MethodSpec.report_sections``), and the report draws those whose
  fields a run recorded. Nothing here may import TensorFlow."""

  round_keys: tuple = ()  # Per-round results.json fields it reads.
  extra_keys: tuple = ()  # results.json ``extra`` fields it reads.

  def estimates(self, results: dict) -> List[Estimate]:
    """Per-client estimates a run recorded, to plot against the true noise rates."""
    del results
    return []

  def summary(self, results: dict) -> List[str]:
    """One line per thing the run estimated, scored against the truth (``compare``)."""
    del results
    return []

  def render(self, w: Writer, groups: Dict[Optional[str], Dict[str, List[Run]]]) -> None:
    """Adds this section to ``w`` for the finished runs, setting -> method -> runs."""
    del w, groups

  @staticmethod
  def found(groups, recorded) -> list:
    """``(setting, method, runs)`` of each method whose runs include one ``recorded``."""
    return [(s, m, runs) for s, methods in groups.items() for m, runs in methods.items()
            if any(recorded(run.results) for run in runs)]
