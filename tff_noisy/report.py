"""``tff-noisy report DIR``: a Markdown report with figures of a run, compare or grid.

Reads only what the commands leave on disk (``results.json``, ``comparison.csv``,
``grid.csv``, the lock and checkpoint directory names) and draws with matplotlib's Agg
backend; it never imports TensorFlow. Writes ``DIR/report.md`` and ``DIR/report-*.png``.

Layouts (as ``experiments/run.py`` writes them):
  run      DIR/results.json
  compare  DIR/METHOD/results.json, DIR/comparison.csv
  grid     DIR/SETTING/seedN/METHOD/results.json, DIR/grid.csv, DIR/grid.md
A run without ``results.json`` (still running, or interrupted) is listed as unfinished
and left out of the tables and figures. A section whose fields no run recorded is left
out.
"""

import csv
import dataclasses
import functools
import json
import math
import os
import re
import shlex
import socket
from typing import Dict, List, Optional, Tuple

import numpy as np

from tff_noisy.errors import UserError
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import run_dir

REPORT_FILE = 'report.md'
_RESULTS = results_lib.RESULTS_FILE
_LOCK = run_dir.LOCK_FILE
_RUN_OUTPUTS = (_RESULTS, 'metrics.csv', 'final_weights.npz', 'checkpoints', 'tb', _LOCK)
_SEED_DIR = re.compile(r'seed(\d+)$')
_CHECKPOINT_DIR = re.compile(r'round_(\d+)$')
# Round-record keys every run writes, and those a section below reads.
_STANDARD_KEYS = {'round', 'seconds', 'wall_time', 'clients', 'client_weights',
                  'skipped_empty_clients', 'non_finite_clients', 'update_rejected',
                  'train_loss', 'train_accuracy', 'train_client_mean_accuracy', 'aggregator',
                  'test_accuracy', 'test_macro_f1'}
_READ_KEYS = {'noise_estimates', 'noise_estimate_correlation', 'reliabilities',
              'reliability_correlation', 'fedds_weights', 'prestop',
              'transition_matrix_error', 'detection_truth', 'label_estimate_accuracy',
              'noisy_clients'}
_READ_EXTRA = {'label_correction', 'lsc'}


class ReportError(UserError):
  """DIR is not something ``tff-noisy report`` can read."""


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


@dataclasses.dataclass
class Layout:
  kind: str                 # run | compare | grid
  directory: str
  runs: List[Run]
  settings: Dict[str, str]  # Setting directory name -> its --setting overrides.
  missing: List[Tuple[Optional[str], Optional[int], str]]  # Named by the lock, not begun.
  lock: Optional[str]


# ----------------------------------------------------------------------------- layout


def _is_run_dir(path: str) -> bool:
  return os.path.isdir(path) and any(os.path.exists(os.path.join(path, name))
                                     for name in _RUN_OUTPUTS)


def _subdirs(path: str) -> List[str]:
  return sorted(name for name in os.listdir(path)
                if os.path.isdir(os.path.join(path, name)) and not name.startswith('.'))


def _lock_holder(path: str) -> Optional[dict]:
  """The lock file's content ({} if unreadable); None without a lock file."""
  lock_path = os.path.join(path, _LOCK)
  if not os.path.exists(lock_path):
    return None
  try:
    with open(lock_path) as f:
      holder = json.load(f)
  except (OSError, ValueError):
    return {}
  return holder if isinstance(holder, dict) else {}


def _lock_note(path: str) -> Optional[str]:
  """'running: PID 12 on host, started ..., `command`' (or 'interrupted: ...')."""
  holder = _lock_holder(path)
  if holder is None:
    return None
  if not holder:
    return 'locked (the lock file names no holder)'
  pid, host = holder.get('pid'), holder.get('host')
  alive = None
  if isinstance(pid, int) and host == socket.gethostname():
    try:
      os.kill(pid, 0)
      alive = True
    except ProcessLookupError:
      alive = False
    except PermissionError:
      alive = True
  state = {True: 'running', False: 'interrupted', None: 'locked'}[alive]
  return (f'{state}: PID {pid} on {host}, started {holder.get("started", "?")}, '
          f'`{holder.get("command", "?")}`')


def _load_run(root: str, path: str, method: str, setting=None, seed=None) -> Run:
  full = os.path.join(root, path)
  results = None
  results_path = os.path.join(full, _RESULTS)
  if os.path.exists(results_path):
    try:
      with open(results_path) as f:
        results = json.load(f)
    except ValueError as e:
      raise ReportError(f'{results_path} is not valid JSON: {e}') from None
  checkpoint_round = None
  checkpoints = os.path.join(full, 'checkpoints')
  if results is None and os.path.isdir(checkpoints):
    rounds = [int(m.group(1)) for m in map(_CHECKPOINT_DIR.match, os.listdir(checkpoints))
              if m]
    checkpoint_round = max(rounds) if rounds else None
  if results is not None:
    method = results.get('method', method)
    if seed is None:
      seed = (results.get('config') or {}).get('seed')
  return Run(path=path, method=method, setting=setting, seed=seed, results=results,
             checkpoint_round=checkpoint_round, lock=_lock_note(full))


def _command_option(command: Optional[str], option: str) -> List[str]:
  """Every value of ``option`` in a lock's command line."""
  try:
    words = shlex.split(command or '')
  except ValueError:
    return []
  return [value for name, value in zip(words, words[1:]) if name == option]


def _command_kind(command: Optional[str]) -> Optional[str]:
  """'run', 'compare' or 'grid': the tff-noisy command of a lock's command line."""
  try:
    words = shlex.split(command or '')
  except ValueError:
    return None
  return next((w for w in words if w in ('run', 'compare', 'grid')), None)


def setting_dir(setting: str) -> str:
  """The directory ``tff-noisy grid`` names a ``--setting`` by."""
  return setting.replace(',', '_').replace('=', '-') or 'default'


def discover(directory: str) -> Layout:
  """Reads the layout of a run, compare or grid directory; ReportError if none fits."""
  if not os.path.isdir(directory):
    raise ReportError(f'{directory} is not a directory')
  lock = _lock_note(directory)
  holder = (_lock_holder(directory) or {}).get('command')
  if os.path.exists(os.path.join(directory, _RESULTS)):
    return _single(directory)

  subdirs = _subdirs(directory)
  method_dirs = [d for d in subdirs if _is_run_dir(os.path.join(directory, d))]
  runs = [_load_run(directory, d, d) for d in method_dirs]
  # A compare names each run directory by its method (unlike a folder of unrelated runs).
  named = all(r.path == r.method for r in runs) and any(r.finished for r in runs)
  command = _command_kind(holder)
  if os.path.exists(os.path.join(directory, 'comparison.csv')) or command == 'compare' or (
      runs and named and command != 'grid'):
    expected = ','.join(_command_option(holder, '--methods')).split(',')
    missing = [(None, None, m) for m in expected if m and m not in method_dirs]
    return Layout('compare', directory, runs, {}, missing, lock)

  runs = []
  for setting in subdirs:
    for seed_name in _subdirs(os.path.join(directory, setting)):
      match = _SEED_DIR.match(seed_name)
      if not match:
        continue
      seed_path = os.path.join(setting, seed_name)
      for method in _subdirs(os.path.join(directory, seed_path)):
        if _is_run_dir(os.path.join(directory, seed_path, method)):
          runs.append(_load_run(directory, os.path.join(seed_path, method), method,
                                setting, int(match.group(1))))
  if runs or os.path.exists(os.path.join(directory, 'grid.csv')) or command == 'grid':
    settings = _grid_settings(directory, holder, runs)
    return Layout('grid', directory, runs, settings, _grid_missing(holder, runs, settings),
                  lock)
  if _is_run_dir(directory):  # A run that has not written results.json yet.
    return _single(directory)
  raise ReportError(
      f'{directory} is not a tff-noisy output directory: expected a run '
      f'({_RESULTS}), a compare directory (METHOD/{_RESULTS} and comparison.csv) or a grid '
      f'directory (SETTING/seedN/METHOD/{_RESULTS} and grid.csv)')


def _single(directory: str) -> Layout:
  run = _load_run(directory, '.', os.path.basename(os.path.abspath(directory)))
  return Layout('run', directory, [run], {}, [], None if run.finished else run.lock)


def _grid_settings(directory: str, command: Optional[str], runs: List[Run]) -> dict:
  """Setting directory name -> the overrides it stands for (grid.csv, else the lock)."""
  named = list(_command_option(command, '--setting'))
  grid_csv = os.path.join(directory, 'grid.csv')
  if os.path.exists(grid_csv):
    with open(grid_csv, newline='') as f:
      named += [row.get('setting', '') for row in csv.DictReader(f)]
  settings = {setting_dir(s): s for s in named}
  if command is not None and not _command_option(command, '--setting'):
    settings.setdefault('default', '')
  for run in runs:  # Overrides unknown: no grid.csv yet and no lock naming them.
    settings.setdefault(run.setting, '' if run.setting == 'default' else None)
  return dict(sorted(settings.items()))


def _grid_missing(command, runs, settings) -> list:
  """Runs the running grid's command names that have no directory yet."""
  methods = ','.join(_command_option(command, '--methods')).split(',')
  seeds = _command_option(command, '--seeds') or ['0']  # The grid command's default.
  if not command or not methods[0]:
    return []
  try:
    seeds = [int(s) for s in seeds[-1].split(',')]
  except ValueError:
    return []
  present = {(r.setting, r.seed, r.method) for r in runs}
  return [(setting, seed, method) for setting in settings for seed in seeds
          for method in methods if (setting, seed, method) not in present]


# --------------------------------------------------------------------------- numbers


def pearson(x, y) -> Optional[float]:
  """Pearson correlation; None with fewer than 2 points or a constant side."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if len(x) < 2 or x.std() == 0 or y.std() == 0:
    return None
  return float(np.corrcoef(x, y)[0, 1])


def curve(results: dict) -> List[Tuple[int, float]]:
  """(round, test accuracy) of the evaluated rounds."""
  return [(r['round'], r['test_accuracy']) for r in results.get('rounds', [])
          if r.get('test_accuracy') is not None]


def mean_std(values) -> Optional[Tuple[float, float, int]]:
  """Mean and population std (as grid.csv) of the values that are not None."""
  values = [v for v in values if v is not None]
  if not values:
    return None
  return float(np.mean(values)), float(np.std(values)), len(values)


def _pct(stats) -> str:
  if stats is None:
    return 'n/a'
  mean, std, n = stats
  return f'{100 * mean:.2f} ± {100 * std:.2f}' if n > 1 else f'{100 * mean:.2f}'


def _num(value, digits=3) -> str:
  if value is None or (isinstance(value, float) and not math.isfinite(value)):
    return 'n/a'
  if isinstance(value, bool) or isinstance(value, int):
    return str(value)
  if isinstance(value, float):
    return f'{value:.{digits}f}'
  return str(value)


def _client_values(records, key) -> Dict[str, float]:
  """Per-client mean over the rounds of a ``{client: value}`` diagnostic."""
  sums, counts = {}, {}
  for record in records:
    for cid, value in (record.get(key) or {}).items():
      if value is not None:
        sums[cid] = sums.get(cid, 0.0) + float(value)
        counts[cid] = counts.get(cid, 0) + 1
  return {cid: sums[cid] / counts[cid] for cid in sorted(sums)}


def _relative_weights(records) -> Dict[str, float]:
  """Each client's aggregation weight over the mean of its round's, averaged over rounds.

  From ``fedds_weights`` where recorded, else from ``client_weights`` when those are not
  all whole numbers (whole numbers are example counts: plain FedAvg weighting).
  """
  rounds = []
  if any(r.get('fedds_weights') for r in records):
    rounds = [r['fedds_weights'] for r in records if r.get('fedds_weights')]
  else:  # Only the rounds that weighted clients by more than their example counts.
    rounds = [dict(zip(r.get('clients') or [], r.get('client_weights') or []))
              for r in records
              if any(w is not None and float(w) != round(float(w))
                     for w in r.get('client_weights') or [])]
  relative = []
  for weights in rounds:
    values = [float(w) for w in weights.values() if w is not None]
    mean = float(np.mean(values)) if values else 0.0
    if mean > 0:
      relative.append({cid: float(w) / mean for cid, w in weights.items() if w is not None})
  return _client_values([{'w': r} for r in relative], 'w')


def client_sizes(results: dict) -> Dict[str, int]:
  """Training examples per client where a run records them: the label correction's
  per-client counts, or a FedAvg/FedProx run's update weights (its example counts)."""
  per_client = ((results.get('extra') or {}).get('label_correction') or {}).get(
      'per_client') or {}
  sizes = {cid: int(r['num_examples']) for cid, r in per_client.items()
           if r and r.get('num_examples') is not None}
  if sizes or results.get('method') not in ('fedavg', 'fedprox'):
    return sizes
  for record in results.get('rounds', []):
    for cid, weight in zip(record.get('clients') or [], record.get('client_weights') or []):
      sizes.setdefault(cid, int(weight))
  return dict(sorted(sizes.items()))


@dataclasses.dataclass
class Estimate:
  """A per-client quantity a method estimated, to compare with the true noise rates."""
  key: str
  label: str
  where: str
  values: Dict[str, float]
  recorded: Optional[Tuple[str, float]] = None  # (what, value) the run itself recorded.


def estimates(results: dict) -> List[Estimate]:
  """The per-client estimates a run recorded (FedLN, FedDS, weighting methods)."""
  records = results.get('rounds', [])
  found = []
  with_estimates = [r for r in records if r.get('noise_estimates')]
  if with_estimates:
    last = with_estimates[-1]
    recorded = last.get('noise_estimate_correlation')
    found.append(Estimate(
        'noise_estimates', 'noise estimate', f'round {last["round"]}',
        {cid: float(v) for cid, v in last['noise_estimates'].items() if v is not None},
        None if recorded is None else ('correlation recorded by the run', recorded)))
  with_reliabilities = [r for r in records if r.get('reliabilities')]
  if with_reliabilities:
    recorded = [r['reliability_correlation'] for r in with_reliabilities
                if r.get('reliability_correlation') is not None]
    found.append(Estimate(
        'reliabilities', 'reliability', f'mean over the {len(with_reliabilities)} rounds '
        'that estimated it', _client_values(with_reliabilities, 'reliabilities'),
        ("the run's own r with 1 - noise rate (mean over rounds)",
         float(np.mean(recorded))) if recorded else None))
  flagged = [r for r in records if 'noisy_clients' in r]
  if flagged and results.get('client_noise_rates'):  # Detection probes every client.
    last = flagged[-1]
    found.append(Estimate(
        'noisy_clients', 'flagged as noisy (1) or not (0)', f'round {last["round"]}',
        {cid: float(cid in (last['noisy_clients'] or [])) for cid in
         sorted(results['client_noise_rates'])}))
  weights = _relative_weights(records)
  if weights:
    found.append(Estimate('weights', 'relative aggregation weight',
                          'weight / mean weight of its round, mean over rounds', weights))
  return found


def estimated_summary(results: dict) -> List[str]:
  """What a run estimated, one line each, scored against the simulation's truth.

  Per-client estimates as their Pearson r with the true noise rates, label correction as
  the share of wrong labels before and after, FedEFC's switch round and matrix error,
  MaskedOptim's detection and label estimates. Empty for a method that estimates nothing.
  """
  lines = []
  rates = results.get('client_noise_rates') or {}
  for estimate in estimates(results):
    cids = [cid for cid in estimate.values if cid in rates]
    r = pearson([rates[cid] for cid in cids], [estimate.values[cid] for cid in cids])
    if r is not None:
      lines.append(f'{estimate.label} vs true noise rate: r = {r:+.2f} over {len(cids)} '
                   'clients')
  overall = ((results.get('extra') or {}).get('label_correction') or {}).get('overall')
  if overall and overall.get('noise_before') is not None:
    lines.append(f'label correction: wrong labels {overall["noise_before"]:.1%} -> '
                 f'{overall["noise_after"]:.1%}')
  records = results.get('rounds', [])
  prestop = [r['prestop'] for r in records if r.get('prestop')]
  if prestop:
    switch = prestop[-1].get('switch_round')
    lines.append('no switch to correction' if switch is None else
                 f'switched to correction after round {switch}')
  errors = [r['transition_matrix_error'] for r in records if r.get('transition_matrix_error')]
  for name, report in (errors[0] if errors else {}).items():
    lines.append(f'{name} transition matrices vs the true ones: mean cosine '
                 f'{_num(report.get("mean_cosine"))}, mean L1 {_num(report.get("mean_l1"))}')
  detection = [r['detection_truth'] for r in records if r.get('detection_truth')]
  if detection:
    last = detection[-1]
    lines.append(f'noisy-client detection: {last.get("flagged")} flagged, '
                 f'{last.get("truly_noisy")} truly noisy; precision '
                 f'{_num(last.get("precision"))}, recall {_num(last.get("recall"))}')
  labels = [r['label_estimate_accuracy'] for r in records if r.get('label_estimate_accuracy')]
  if labels and labels[-1].get('accuracy') is not None:
    last = labels[-1]
    lines.append(f'labels on flagged clients: {last["observed_accuracy"]:.1%} right as '
                 f'observed, {last["accuracy"]:.1%} as estimated')
  return lines


# ---------------------------------------------------------------------------- figures


def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _slug(*parts) -> str:
  text = '-'.join(str(p) for p in parts if p not in (None, ''))
  return re.sub(r'[^A-Za-z0-9._-]+', '_', text)


def _save(fig, path: str) -> None:
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  _pyplot().close(fig)


def plot_accuracy(curves: Dict[str, List[List[Tuple[int, float]]]], title: str,
                  path: str) -> None:
  """Mean test accuracy per method; with several seeds a min-max band around it."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(6.5, 4))
  for method, runs in curves.items():
    rounds = sorted(set.intersection(*(set(r for r, _ in points) for points in runs)))
    if not rounds:
      continue
    values = np.array([[dict(points)[r] for r in rounds] for points in runs])
    line, = ax.plot(rounds, values.mean(axis=0),
                    label=method if len(runs) == 1 else f'{method} ({len(runs)} seeds)')
    if len(runs) > 1:
      ax.fill_between(rounds, values.min(axis=0), values.max(axis=0),
                      color=line.get_color(), alpha=0.2, linewidth=0)
  ax.set_xlabel('round')
  ax.set_ylabel('test accuracy')
  ax.set_title(title, fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  _save(fig, path)


def plot_scatter(points: Dict[str, Tuple[list, list]], xlabel: str, ylabel: str,
                 title: str, path: str, diagonal: bool) -> None:
  """One series per label (a seed); ``diagonal`` draws y = x."""
  plt = _pyplot()
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
  _save(fig, path)


def plot_prestop(series: Dict[str, Tuple[list, list, Optional[int]]], title: str,
                 path: str) -> None:
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(6.5, 3.5))
  for label, (rounds, signal, switch) in series.items():
    line, = ax.plot(rounds, signal, label=label)
    if switch is not None:
      ax.axvline(switch, color=line.get_color(), linestyle='--', linewidth=1)
  ax.set_xlabel('round')
  ax.set_ylabel('prestopping signal')
  ax.set_title(title, fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  _save(fig, path)


# ----------------------------------------------------------------------------- report


class _Writer:
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


def _groups(layout: Layout) -> Dict[Optional[str], Dict[str, List[Run]]]:
  """setting -> method -> finished runs (by seed), in directory order."""
  groups: Dict[Optional[str], Dict[str, List[Run]]] = {}
  for run in layout.runs:
    if run.finished:
      groups.setdefault(run.setting, {}).setdefault(run.method, []).append(run)
  for methods in groups.values():
    for runs in methods.values():
      runs.sort(key=lambda r: (r.seed is None, r.seed))
  return groups


def _setting_title(layout: Layout, setting: Optional[str]) -> str:
  if setting is None:
    return ''
  overrides = layout.settings.get(setting)
  if overrides is None:
    return f'`{setting}`'
  return f'`{overrides}`' if overrides else 'the config as given (`default`)'


def _count(n: int, noun: str) -> str:
  return f'{n} {noun}' + ('' if n == 1 else 's')


def _seed_label(run: Run) -> str:
  return f'seed {run.seed}' if run.seed is not None else run.method


def _flatten(value, prefix='') -> dict:
  if isinstance(value, dict):
    flat = {}
    for key, item in value.items():
      flat.update(_flatten(item, f'{prefix}{key}.'))
    return flat
  return {prefix[:-1]: value}


def _intro(w: _Writer, layout: Layout) -> None:
  finished = [r for r in layout.runs if r.finished]
  methods = list(dict.fromkeys([r.method for r in layout.runs] +
                               [m for _, _, m in layout.missing]))
  seeds = sorted({r.seed for r in layout.runs if r.seed is not None} |
                 {seed for _, seed, _ in layout.missing if seed is not None})
  name = os.path.basename(os.path.abspath(layout.directory))
  w.add(f'# Report: {name}', '')
  if layout.kind == 'run':
    run = layout.runs[0]
    what = f'One `tff-noisy run` of **{run.method}**' + (
        f' (seed {run.seed})' if run.seed is not None else '') + '.'
  elif layout.kind == 'compare':
    what = (f'A `tff-noisy compare` of {_count(len(methods), "method")} '
            f'({", ".join(methods)}) on the same data.')
  else:
    what = (f'A `tff-noisy grid`: {_count(len(layout.settings), "setting")} x '
            f'{_count(len(seeds), "seed")} ({", ".join(map(str, seeds))}) x '
            f'{_count(len(methods), "method")} ({", ".join(methods)}); every method of a '
            'setting and seed ran on the same data.')
  w.add(what, '', f'Directory: `{os.path.abspath(layout.directory)}`. Written by '
        '`tff-noisy report`; the figures are the `report-*.png` files next to this file.', '')
  unfinished = [r for r in layout.runs if not r.finished]
  if layout.lock:  # 'running: PID ...', 'interrupted: PID ...' or 'locked ...'.
    state, _, holder = layout.lock.partition(': ')
    w.add(f'**{state.capitalize()}**' + (f' (lock file: {holder}).' if holder else '.'), '')
  if layout.kind != 'run' and (unfinished or layout.missing):
    total = len(layout.runs) + len(layout.missing)
    w.add(f'{len(finished)} of {total} runs finished. Only finished runs are in the '
          'tables and figures.', '')
  if layout.kind == 'run' and unfinished:
    w.add('**This run is not finished** (no `results.json`).', '')


def _runs_section(w: _Writer, layout: Layout) -> None:
  if layout.kind == 'run' and layout.runs[0].finished:
    return
  w.add('## Runs', '')
  rows = []
  for run in layout.runs:
    if run.finished:
      status = 'finished'
      link = f'[{run.path}]({os.path.join(run.path, _RESULTS)})'
    else:
      status = 'unfinished (no results.json)'
      if run.checkpoint_round is not None:
        status += f', checkpointed through round {run.checkpoint_round}'
      if run.lock:
        status += f'; {run.lock.split(":")[0]}'
      link = f'`{run.path}`'
    rows.append(([run.setting or ''] if layout.kind == 'grid' else []) + [
        run.method, '' if run.seed is None else run.seed, status, link])
  for setting, seed, method in layout.missing:
    rows.append(([setting or ''] if layout.kind == 'grid' else []) + [
        method, '' if seed is None else seed, 'not started', ''])
  w.table((['setting'] if layout.kind == 'grid' else []) +
          ['method', 'seed', 'status', 'where'], rows)


def _setup_section(w: _Writer, layout: Layout, groups) -> None:
  finished = [r for r in layout.runs if r.finished]
  if not finished:
    return
  config = finished[0].results.get('config') or {}
  w.add('## Setup', '')
  data, partition = config.get('data') or {}, config.get('partition') or {}
  noise, model, fl = config.get('noise') or {}, config.get('model') or {}, config.get('fl') or {}
  if data:
    subset = f', {data["train_subset"]} training examples' if data.get('train_subset') else ''
    w.add(f'- Data: {data.get("dataset")}{subset}.')
  if partition:
    w.add(f'- Partition: {partition.get("name")}, {partition.get("num_clients")} clients.')
  if noise:
    w.add(f'- Noise model: {noise.get("name")} (all its fields are in the config below).')
  if model:
    w.add(f'- Model: {model.get("name")}.')
  if fl:
    per_round = (f'{fl["clients_per_round"]} clients' if fl.get('clients_per_round')
                 else f'participation {fl.get("participation")}')
    w.add(f'- Training: {fl.get("rounds")} rounds, {per_round} per round, '
          f'{fl.get("local_epochs")} local epoch(s), batch {fl.get("batch_size")}, '
          f'{fl.get("client_optimizer")} lr {fl.get("client_lr")} momentum '
          f'{fl.get("momentum")}, weight decay {fl.get("weight_decay")}, server lr '
          f'{fl.get("server_lr")}, aggregator {fl.get("aggregator")}.')
  seeds = sorted({r.seed for r in finished if r.seed is not None})
  if seeds:
    w.add(f'- Seeds: {", ".join(map(str, seeds))}.')
  flat = [_flatten({k: v for k, v in (r.results.get('config') or {}).items()
                    if k != 'method'}) for r in finished]
  varying = sorted(k for k in set().union(*flat)
                   if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1)
  if varying:
    w.add(f'- Differs between runs (besides the method): '
          f'{", ".join(f"`{k}`" for k in varying)}.')
  w.add('')
  if layout.kind == 'grid':
    w.table(['setting directory', 'overrides'],
            [[s, '(not recorded)' if o is None else f'`{o}`' if o else '(none)']
             for s, o in layout.settings.items()])
  params = {}
  for run in finished:
    params.setdefault(run.method, run.results.get('params') or {})
  w.add('Method parameters (as resolved by the run):', '')
  w.table(['method', 'parameters'],
          [[m, ', '.join(f'{k}={v}' for k, v in p.items()) or '(none)']
           for m, p in params.items()])
  shown = {k: v for k, v in config.items() if k != 'method'}
  w.add('<details><summary>Full config of the first finished run '
        f'(<code>{finished[0].path}</code>)</summary>', '', '```json',
        json.dumps(shown, indent=1), '```', '', '</details>', '')


def _data_section(w: _Writer, layout: Layout) -> None:
  by_data = {}
  for run in layout.runs:
    if run.finished:
      by_data.setdefault((run.setting, run.seed), []).append(run)
  if not by_data:
    return
  w.add('## Data', '')
  rows, mixed = [], []
  for (setting, seed), runs in by_data.items():
    rates = runs[0].results.get('client_noise_rates') or {}
    hashes = {r.results.get('data_hash') for r in runs}
    if len(hashes) > 1:
      mixed.append(f'{setting or ""} seed {seed}'.strip())
    sizes = {}
    for run in runs:
      sizes.update(client_sizes(run.results))
    values = np.array(list(rates.values()), np.float64)
    row = ([setting or ''] if layout.kind == 'grid' else []) + [
        '' if seed is None else seed, f'`{str(runs[0].results.get("data_hash"))[:12]}`',
        len(rates)]
    if len(values):
      row += [f'{int(np.sum(values > 0))} of {len(values)}', f'{values.mean():.3f}',
              f'{values.min():.3f} / {np.median(values):.3f} / {values.max():.3f}']
    else:
      row += ['n/a'] * 3
    if sizes:
      size = np.array(list(sizes.values()))
      row.append(f'{size.min()} / {int(np.median(size))} / {size.max()} '
                 f'({len(size)} clients, {size.sum()} examples)')
    else:
      row.append('not recorded')
    rows.append(row)
  w.add('True per-client noise rates (`client_noise_rates`: the simulation truth, never '
        'shown to a method). Client sizes come from a FedAvg/FedProx run\'s update '
        'weights or a label correction\'s counts, for the clients that took part.', '')
  w.table(([] if layout.kind != 'grid' else ['setting']) + [
      'seed', 'data hash', 'clients', 'noisy clients', 'mean noise rate',
      'noise rate min / median / max', 'client size min / median / max'], rows)
  if mixed:
    w.add(f'**Warning:** the methods did not all run on the same data for '
          f'{", ".join(mixed)} (different data hashes).', '')


def _accuracy_section(w: _Writer, layout: Layout, groups) -> None:
  if not groups:
    return
  w.add('## Test accuracy', '')
  several = any(len(runs) > 1 for methods in groups.values() for runs in methods.values())
  if layout.kind == 'run':
    run = next(iter(next(iter(groups.values())).values()))[0]
    final, last10 = run.results.get('final_accuracy'), run.results.get('last10_accuracy')
    rounds = _count(len(run.results.get('rounds', [])), 'round')
    if final is None:
      w.add(f'No evaluated round ({rounds}).', '')
    else:
      w.add(f'Final test accuracy {_pct(mean_std([final]))}%, mean of the last 10 '
            f'evaluated rounds {_pct(mean_std([last10]))}%, after {rounds}.', '')
  else:
    w.add('Test accuracy (%) after the last round and mean of the last 10 evaluated rounds'
          + (', mean ± std over seeds (population std, as `grid.csv`).' if several else '.'),
          '')
    rows = []
    for setting, methods in groups.items():
      for method, runs in methods.items():
        rows.append(([setting] if layout.kind == 'grid' else []) + [
            method, ', '.join(str(r.seed) for r in runs),
            _pct(mean_std(r.results.get('final_accuracy') for r in runs)),
            _pct(mean_std(r.results.get('last10_accuracy') for r in runs))])
    w.table((['setting'] if layout.kind == 'grid' else []) +
            ['method', 'seeds', 'final', 'last 10'], rows)
  for setting, methods in groups.items():
    curves = {m: [curve(r.results) for r in runs] for m, runs in methods.items()}
    curves = {m: c for m, c in curves.items() if all(c)}
    if not curves:
      continue
    band = ' Band: min to max over seeds.' if any(len(c) > 1 for c in curves.values()) else ''
    if setting is not None:
      w.add(f'Setting {_setting_title(layout, setting)}: test accuracy per round, mean '
            f'over seeds.{band}', '')
    title = 'test accuracy' + (f' - {layout.settings.get(setting) or setting}'
                               if setting is not None else '')
    plot_accuracy(curves, title, w.figure(_slug('report-accuracy', setting) + '.png',
                                          f'test accuracy per round {setting or ""}'.strip()))


def _estimates_section(w: _Writer, layout: Layout, groups) -> None:
  found = []
  for setting, methods in groups.items():
    for method, runs in methods.items():
      per_key = {}
      for run in runs:
        rates = run.results.get('client_noise_rates') or {}
        for estimate in estimates(run.results):
          if any(cid in rates for cid in estimate.values):
            per_key.setdefault(estimate.key, []).append((run, estimate))
      found += [(setting, method, key, items) for key, items in per_key.items()]
  if not found:
    return
  w.add('## Per-client estimates vs the true noise rates', '')
  w.add('Each point is a client: its true noise rate against what the method estimated. '
        'A noise estimate or a noisy flag should rise with the true rate (r near +1); a '
        'reliability or an aggregation weight should fall (r near -1). r is the Pearson '
        'correlation over the clients with an estimate.', '')
  for setting, method, key, items in found:
    label, where = items[0][1].label, items[0][1].where
    heading = f'### {method}: {label}'
    if setting is not None:
      heading += f' ({setting})'
    w.add(heading, '', f'{label.capitalize()}: {where}.', '')
    points, rows, rs = {}, [], []
    for run, estimate in items:
      rates = run.results.get('client_noise_rates') or {}
      cids = [cid for cid in estimate.values if cid in rates]
      x = [rates[cid] for cid in cids]
      y = [estimate.values[cid] for cid in cids]
      r = pearson(x, y)
      if r is not None:
        rs.append(r)
      points[f'{_seed_label(run)} (r={_num(r)})'] = (x, y)
      rows.append([_seed_label(run), len(cids), _num(r),
                   _num(estimate.recorded[1]) if estimate.recorded else 'n/a'])
    recorded = next((e.recorded for _, e in items if e.recorded), None)
    if not recorded:
      rows = [row[:-1] for row in rows]
    w.table(['run', 'clients', 'Pearson r with the true noise rate'] +
            ([recorded[0]] if recorded else []), rows)
    if len(rs) > 1:
      w.add(f'Mean r over seeds: {np.mean(rs):.3f}.', '')
    plot_scatter(points, 'true noise rate', label, f'{method}: {label}',
                 w.figure(_slug('report', setting, method, key) + '.png',
                          f'{method} {label} vs true noise rate'),
                 diagonal=key == 'noise_estimates')


def _prestop_section(w: _Writer, groups) -> None:
  found = [(s, m, runs) for s, methods in groups.items() for m, runs in methods.items()
           if any(rec.get('prestop') or rec.get('transition_matrix_error')
                  for run in runs for rec in run.results.get('rounds', []))]
  if not found:
    return
  w.add('## Prestopping and transition matrices (FedEFC, forward correction)', '')
  w.add('The switch round is the last round trained with plain cross-entropy; correction '
        'starts after it. The matrix errors compare the estimated per-client transition '
        'matrices with the true ones (L1: lower is better; cosine: higher is better).', '')
  rows, figures = [], []
  for setting, method, runs in found:
    series = {}
    for run in runs:
      records = run.results.get('rounds', [])
      prestop = [r for r in records if r.get('prestop')]
      switch = prestop[-1]['prestop'].get('switch_round') if prestop else None
      errors = [r for r in records if r.get('transition_matrix_error')]
      base = ([setting] if setting is not None else []) + [method, _seed_label(run),
                                                            _num(switch) if prestop else 'n/a']
      if switch is None and prestop:
        base[-1] = 'no switch'
      if errors:
        for name, report in errors[0]['transition_matrix_error'].items():
          rows.append(base + [f'{name} (round {errors[0]["round"]})',
                              _num(report.get('mean_l1')), _num(report.get('mean_cosine')),
                              len(report.get('per_client') or {})])
      else:
        rows.append(base + ['not recorded', '', '', ''])
      signal = [(r['round'], r['prestop'].get('signal')) for r in prestop
                if r['prestop'].get('signal') is not None]
      if signal:
        series[_seed_label(run)] = ([p[0] for p in signal], [p[1] for p in signal], switch)
    if series:
      kind = next((r['prestop'].get('signal_kind') for run in runs
                   for r in run.results.get('rounds', []) if r.get('prestop')), None)
      figures.append((
          f'{method}{f" ({setting})" if setting else ""}: the prestopping signal'
          f'{f" ({kind})" if kind else ""} per round; the dashed line is the switch.',
          functools.partial(plot_prestop, series, f'{method}: prestopping signal'),
          _slug('report', setting, method, 'prestop') + '.png',
          f'{method} prestopping signal'))
  has_setting = any(s is not None for s, _, _ in found)
  w.table((['setting'] if has_setting else []) + [
      'method', 'run', 'switch round', 'matrix estimator', 'mean L1', 'mean cosine',
      'clients'], rows)
  w.figures_after(figures)


_CORRECTION_FIELDS = ('fraction_changed', 'precision', 'noise_before', 'noise_after',
                      'fixed', 'corrupted')


def _correction_section(w: _Writer, groups) -> None:
  found = [(s, m, [r for r in runs if (r.results.get('extra') or {}).get('label_correction')])
           for s, methods in groups.items() for m, runs in methods.items()]
  found = [(s, m, runs) for s, m, runs in found if runs]
  if not found:
    return
  w.add('## Label correction', '')
  w.add('Labels the method changed before training, against the true labels: changed '
        '(share of labels changed), precision (share of the changes that made a label '
        'right), noise before / after (share of wrong labels), fixed (share of wrong '
        'labels made right), corrupted (share of right labels made wrong).', '')
  rows, figures = [], []
  has_setting = any(s is not None for s, _, _ in found)
  for setting, method, runs in found:
    points = {}
    for run in runs:
      report = run.results['extra']['label_correction']
      overall = report.get('overall') or {}
      rows.append(([setting] if has_setting else []) + [method, _seed_label(run),
                                                        _num(overall.get('num_examples'))] +
                  [_num(overall.get(k)) for k in _CORRECTION_FIELDS])
      per_client = report.get('per_client') or {}
      pairs = [(c['noise_before'], c['noise_after']) for c in per_client.values()
               if c and c.get('noise_before') is not None and c.get('noise_after') is not None]
      if pairs:
        points[_seed_label(run)] = ([p[0] for p in pairs], [p[1] for p in pairs])
    if points:
      figures.append((
          f'{method}{f" ({setting})" if setting else ""}: per-client share of wrong '
          'labels before and after the correction; points below the dashed line are '
          'clients it cleaned.',
          functools.partial(plot_scatter, points, 'noise before correction',
                            'noise after correction', f'{method}: label correction per client',
                            diagonal=True),
          _slug('report', setting, method, 'label-correction') + '.png',
          f'{method} label correction per client'))
  w.table((['setting'] if has_setting else []) + [
      'method', 'run', 'examples', 'changed', 'precision', 'noise before', 'noise after',
      'fixed', 'corrupted'], rows)
  w.figures_after(figures)


def _scalars(values: dict) -> str:
  return ', '.join(f'{k} {_num(v)}' for k, v in values.items()
                   if v is None or isinstance(v, (int, float, str)))


def _detection_section(w: _Writer, groups) -> None:
  rows = []
  for setting, methods in groups.items():
    for method, runs in methods.items():
      for run in runs:
        records = run.results.get('rounds', [])
        for key, what in (('detection_truth', 'noisy-client detection vs the truth'),
                          ('label_estimate_accuracy', 'estimated labels vs the true labels')):
          last = [r for r in records if r.get(key)]
          if last:
            rows.append(([setting] if setting is not None else []) + [
                method, _seed_label(run), f'{what} (round {last[-1]["round"]})',
                _scalars(last[-1][key])])
  if rows:
    w.add('## Noisy-client detection and label estimates', '')
    has_setting = any(s is not None for s in groups)
    w.table((['setting'] if has_setting else []) + ['method', 'run', 'what', 'values'],
            rows)


def _lsc_section(w: _Writer, groups) -> None:
  rows = []
  for setting, methods in groups.items():
    for method, runs in methods.items():
      for run in runs:
        lsc = (run.results.get('extra') or {}).get('lsc')
        if lsc:
          rows.append(([setting] if setting is not None else []) + [
              method, _seed_label(run), _num(lsc.get('neighbour_purity')),
              _num(lsc.get('same_label_chance')), _num(lsc.get('k')),
              f'`{str(lsc.get("encoder"))[:24]}`'])
  if rows:
    w.add('## LSC neighbour purity', '')
    w.add('Neighbour purity: the share of an example\'s in-batch nearest neighbours (in '
          'the encoder\'s embedding) with the same true label; same-label chance: that '
          'share for random in-batch pairs.', '')
    has_setting = any(s is not None for s in groups)
    w.table((['setting'] if has_setting else []) + [
        'method', 'run', 'neighbour purity', 'same-label chance', 'k', 'encoder'], rows)


def _other_section(w: _Writer, groups) -> None:
  rows = []
  for setting, methods in groups.items():
    for method, runs in methods.items():
      results = runs[0].results
      keys = sorted({k for r in results.get('rounds', []) for k in r}
                    - _STANDARD_KEYS - _READ_KEYS)
      extra = {k: v for k, v in (results.get('extra') or {}).items() if k not in _READ_EXTRA}
      if keys or extra:
        rows.append(([setting] if setting is not None else []) + [
            method, ', '.join(f'`{k}`' for k in keys) or '',
            _scalars(extra) or ', '.join(f'`{k}`' for k in extra)])
  if rows:
    w.add('## Other recorded diagnostics', '')
    w.add('Fields this report does not draw; they are in each run\'s `results.json` '
          '(per round under `rounds`, per run under `extra`).', '')
    has_setting = any(s is not None for s in groups)
    w.table((['setting'] if has_setting else []) + ['method', 'per round', 'per run'],
            rows)


def write_report(directory: str) -> Tuple[str, List[str]]:
  """Writes DIR/report.md and its figures; returns the report's path and the figures."""
  layout = discover(directory)
  try:
    return _write(layout)
  except OSError as e:
    raise ReportError(f'cannot write the report into {directory}: {e.strerror or e}') from None


def _write(layout: Layout) -> Tuple[str, List[str]]:
  directory = layout.directory
  groups = _groups(layout)
  w = _Writer(directory)
  _intro(w, layout)
  _accuracy_section(w, layout, groups)
  _estimates_section(w, layout, groups)
  _prestop_section(w, groups)
  _correction_section(w, groups)
  _detection_section(w, groups)
  _lsc_section(w, groups)
  _other_section(w, groups)
  _setup_section(w, layout, groups)
  _data_section(w, layout)
  _runs_section(w, layout)
  path = os.path.join(directory, REPORT_FILE)
  with open(path, 'w') as f:
    f.write('\n'.join(w.lines).rstrip() + '\n')
  return path, w.figures
