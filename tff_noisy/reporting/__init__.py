"""The building blocks of what ``tff-noisy report`` (``tff_noisy.report``) writes, which
the methods' report sections import; never TensorFlow: a run as the report sees it (:class:`Run`), the
  Markdown writer, number formats, figures (matplotlib's Agg, imported only to draw; each
  a PNG at print resolution with a PDF beside it, each series with its own colour from a
  colour-blind-safe palette, marker and line style) and
  :class:`Section`, the part of the report a method's diagnostics render (each method
  folder's ``report.py`` holds its sections, listed in its registry entry).
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


def evaluated_window(results: dict, last: int = 10) -> int:
  """How many evaluated rounds a run's "last 10" mean covers (fewer in a shorter run)."""
  evaluated = [r for r in results.get('rounds', []) if r.get('test_accuracy') is not None]
  return min(last, len(evaluated))


def last_label(windows, last: int = 10) -> str:
  """'last 10', or the rounds shorter runs' "last 10" cover ('last 4', 'last 4-10')."""
  windows = sorted(set(windows))
  if windows in ([], [last]):
    return f'last {last}'
  return f'last {windows[0]}' + (f'-{windows[-1]}' if len(windows) > 1 else '')


def window_label(runs: List['Run'], last: int = 10) -> str:
  """``last_label`` of the finished runs' evaluated rounds."""
  return last_label([evaluated_window(run.results, last) for run in runs if run.finished],
                    last)


# Figures: PNG at print resolution, and the same figure as a vector PDF beside it.
DPI = 300
VECTOR = 'pdf'
# Okabe & Ito's colour-blind-safe palette (yellow last: faint on white).
PALETTE = ('#000000', '#E69F00', '#56B4E9', '#009E73', '#0072B2', '#D55E00', '#CC79A7',
           '#F0E442')
MARKERS = ('o', 's', '^', 'D', 'v', 'P', 'X', '*')
LINESTYLES = ('-', '--', '-.', ':', (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))


def style(index: int) -> dict:
  """Colour, marker and line style of series ``index``: no two of the first 24 share all
  three, and each is told apart by its marker and line style without colour."""
  return {'color': PALETTE[index % len(PALETTE)], 'marker': MARKERS[index % len(MARKERS)],
          'linestyle': LINESTYLES[index % len(LINESTYLES)]}


def pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  matplotlib.rcParams.update({'pdf.fonttype': 42, 'font.size': 8, 'axes.titlesize': 8,
                              'legend.fontsize': 7})
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def slug(*parts) -> str:
  text = '-'.join(str(p) for p in parts if p not in (None, ''))
  return re.sub(r'[^A-Za-z0-9._-]+', '_', text)


def vector_path(path: str) -> str:
  """Where ``save`` writes the vector copy of the PNG at ``path``."""
  return os.path.splitext(path)[0] + '.' + VECTOR


def save(fig, path: str) -> None:
  """Writes ``path`` (PNG, ``DPI``) and its vector copy, each whole or not at all
  (``files.write_file``); both the same bytes for the same figure (no dates)."""
  png, vector = io.BytesIO(), io.BytesIO()
  fig.savefig(png, format='png', dpi=DPI, bbox_inches='tight', metadata={'Software': None})
  fig.savefig(vector, format=VECTOR, bbox_inches='tight',
              metadata={'CreationDate': None, 'Creator': None, 'Producer': None})
  pyplot().close(fig)
  files.write_file(path, png.getvalue())
  files.write_file(vector_path(path), vector.getvalue())


def jitter(values, spread: float, seed: int) -> np.ndarray:
  """``values`` moved by up to ``spread`` either way (seeded: the same figure each time),
  so points with equal values stay visible."""
  values = np.asarray(values, np.float64)
  return values + np.random.default_rng(seed).uniform(-spread, spread, len(values))


JITTER = 0.015  # Of each axis' range, either way.


def _spread(values: np.ndarray) -> float:
  """``JITTER`` of the values' range (of 1 if they are all equal)."""
  return JITTER * (float(np.ptp(values)) or 1.0) if len(values) else 0.0


def plot_scatter(points: Dict[str, Tuple[list, list]], xlabel: str, ylabel: str,
                 title: str, path: str, diagonal: bool) -> None:
  """One series per label (a seed), each point jittered by up to ``JITTER`` of each
  axis' range, with the least-squares line over all points; ``diagonal`` draws y = x."""
  plt = pyplot()
  fig, ax = plt.subplots(figsize=(3.4, 2.8))
  xs = np.array([v for x, _ in points.values() for v in x], np.float64)
  ys = np.array([v for _, y in points.values() for v in y], np.float64)
  for i, (label, (x, y)) in enumerate(points.items()):
    look = style(i)
    ax.scatter(jitter(x, _spread(xs), 2 * i), jitter(y, _spread(ys), 2 * i + 1), s=14,
               alpha=0.75, color=look['color'], marker=look['marker'], label=label,
               linewidths=0)
  if len(xs) > 1 and np.ptp(xs) > 0:
    slope, intercept = np.polyfit(xs, ys, 1)
    ends = np.array([xs.min(), xs.max()])
    ax.plot(ends, intercept + slope * ends, color='#555555', linewidth=1.2,
            label=f'least-squares fit (slope {slope:.2f})')
  if diagonal:
    values = list(xs) + list(ys)
    low, high = min(values + [0.0]), max(values + [1e-9])
    ax.plot([low, high], [low, high], color='gray', linestyle='--', linewidth=1,
            label='y = x')
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(alpha=0.3)
  if points:
    ax.legend()
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

  def events(self, results: dict) -> Dict[str, int]:
    """Rounds to mark on the accuracy curves, by what happened (FedEFC's switch)."""
    del results
    return {}

  def render(self, w: Writer, groups: Dict[Optional[str], Dict[str, List[Run]]]) -> None:
    """Adds this section to ``w`` for the finished runs, setting -> method -> runs."""
    del w, groups

  @staticmethod
  def found(groups, recorded) -> list:
    """``(setting, method, runs)`` of each method whose runs include one ``recorded``."""
    return [(s, m, runs) for s, methods in groups.items() for m, runs in methods.items()
            if any(recorded(run.results) for run in runs)]


class LastRoundSection(Section):
  """A section of one per-round record (``round_keys[0]``), as each run's last round left
  it: a table of ``columns`` (``(header, field)`` pairs, after setting, method, run, round)
  under ``title`` and ``explanation``, and ``summary_line`` for ``compare``."""

  title: str = ''
  explanation: str = ''
  columns: tuple = ()

  def last(self, results) -> dict:
    """The last round's record (its round number under ``round``), or {}."""
    key = self.round_keys[0]
    records = [r for r in results.get('rounds', []) if r.get(key)]
    return dict(records[-1][key], round=records[-1].get('round')) if records else {}

  def summary_line(self, last: dict) -> Optional[str]:
    """The line ``compare`` prints of a run's last record; None: nothing to say."""
    del last
    return None

  def summary(self, results):
    line = self.summary_line(self.last(results))
    return [line] if line else []

  def render(self, w, groups):
    rows = []
    has_setting = any(s is not None for s in groups)
    for setting, method, runs in self.found(groups, self.last):
      for run in runs:
        last = self.last(run.results)
        if last:
          rows.append(([setting] if has_setting else []) + [
              method, seed_label(run), num(last.get('round'))] + [
                  num(last.get(field)) for _, field in self.columns])
    if rows:
      w.add(f'## {self.title}', '', self.explanation, '')
      w.table((['setting'] if has_setting else []) + ['method', 'run', 'round'] + [
          header for header, _ in self.columns], rows)
