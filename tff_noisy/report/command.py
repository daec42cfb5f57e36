"""``tff-noisy report DIR``: a Markdown report with figures of a run, compare or grid.

Reads only what the commands leave on disk (``results.json``, ``comparison.csv``,
``grid.csv``, the lock and checkpoint directory names) and draws with matplotlib's Agg
backend; it never imports TensorFlow. Writes ``DIR/report.md`` and ``DIR/report-*.png``,
each figure also as ``DIR/report-*.pdf`` (``reporting.VECTOR``); ``publish`` copies a
compare or grid with its runs' results to a folder to commit.

Layouts (as ``experiments/run.py`` writes them):
  run      DIR/results.json
  compare  DIR/METHOD/results.json, DIR/comparison.csv
  grid     DIR/SETTING/seedN/METHOD/results.json, DIR/grid.csv, DIR/grid.md; a row of
           a reproduced table (``reproduce``: a method under overrides of its own) is
           in DIR/SETTING/seedN/ROW and reported as its row, which the manifest names
A run without ``results.json`` (still running, or interrupted) is listed as unfinished
and left out of the tables and figures. A section whose fields no run recorded is left
out.
"""

import csv
import dataclasses
import json
import os
import re
import socket
import textwrap
from typing import Dict, List, Optional, Tuple

import numpy as np

from tff_noisy import files
from tff_noisy import methods as registry
from tff_noisy import reporting
from tff_noisy.errors import UserError, os_reason
from tff_noisy.methods import display_name
from tff_noisy.report import paper_table
from tff_noisy.reporting import (Estimate, Run, Writer, mean_std, num, pct, pearson,
                                 plot_scatter, pyplot, save, scalars, seed_label, slug,
                                 style, weights_estimate, window_label)
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import run_dir
from tff_noisy.simulation import studies

REPORT_FILE = 'report.md'
_RESULTS = results_lib.RESULTS_FILE
_LOCK = run_dir.LOCK_FILE
_RUN_OUTPUTS = (_RESULTS, 'metrics.csv', 'final_weights.npz', 'checkpoints', 'tb', _LOCK)
_SEED_DIR = re.compile(r'seed(\d+)$')
_CHECKPOINT_DIR = re.compile(r'round_(\d+)$')
# Round-record keys every run writes (a method's report sections declare the keys they read).
_STANDARD_KEYS = {'round', 'seconds', 'wall_time', 'clients', 'client_weights',
                  'skipped_empty_clients', 'non_finite_clients', 'update_rejected',
                  'train_loss', 'train_accuracy', 'train_client_mean_accuracy', 'aggregator',
                  'test_accuracy', 'test_macro_f1', 'test_class_accuracy'}


class ReportError(UserError):
  """DIR is not something ``tff-noisy report`` can read."""


@dataclasses.dataclass
class Layout:
  kind: str                 # run | compare | grid
  directory: str
  runs: List[Run]
  settings: Dict[str, str]  # Setting directory name -> its --setting overrides.
  missing: List[Tuple[Optional[str], Optional[int], str]]  # In the manifest, not begun.
  lock: Optional[str]
  paper: Optional[dict] = None  # A reproduced table (``reproduce``), from the manifest.
  methods: List[str] = dataclasses.field(default_factory=list)  # The manifest's order.


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


def _load_run(root: str, path: str, method: str, setting=None, seed=None,
              row: Optional[str] = None) -> Run:
  """The run in ``root/path``, named by its results' method, else ``method`` (its
  directory); by ``row`` when the study ran it as a row (its method is not its name)."""
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
  return Run(path=path, method=row or method, setting=setting, seed=seed, results=results,
             checkpoint_round=checkpoint_round, lock=_lock_note(full))


def discover(directory: str) -> Layout:
  """Reads the layout of a run, compare or grid directory; ReportError if none fits.

  A compare or grid lays itself out by its ``manifest.json`` (``studies``), which also
  names the runs not started yet; a directory written without one is read by its shape.
  """
  if not os.path.isdir(directory):
    raise ReportError(f'{directory} is not a directory')
  lock = _lock_note(directory)
  if os.path.exists(os.path.join(directory, _RESULTS)):
    return _single(directory)
  manifest = studies.read_manifest(directory) or {}
  kind = manifest.get('kind')

  subdirs = _subdirs(directory)
  method_dirs = [d for d in subdirs if _is_run_dir(os.path.join(directory, d))]
  runs = [_load_run(directory, d, d) for d in method_dirs]
  # A compare names each run directory by its method (unlike a folder of unrelated runs).
  named = all(r.path == r.method for r in runs) and any(r.finished for r in runs)
  if os.path.exists(os.path.join(directory, 'comparison.csv')) or kind == 'compare' or (
      runs and named and kind != 'grid'):
    return Layout('compare', directory, runs, {}, _not_started(manifest, runs), lock,
                  methods=list(manifest.get('methods') or []))

  rows = {os.path.normpath(r['path']): r['row'] for r in manifest.get('runs') or []
          if isinstance(r, dict) and r.get('row') and r.get('path')}
  runs = []
  for setting in subdirs:
    for seed_name in _subdirs(os.path.join(directory, setting)):
      match = _SEED_DIR.match(seed_name)
      if not match:
        continue
      seed_path = os.path.join(setting, seed_name)
      for method in _subdirs(os.path.join(directory, seed_path)):
        if _is_run_dir(os.path.join(directory, seed_path, method)):
          path = os.path.join(seed_path, method)
          runs.append(_load_run(directory, path, method, setting, int(match.group(1)),
                                rows.get(os.path.normpath(path))))
  if runs or os.path.exists(os.path.join(directory, 'grid.csv')) or kind == 'grid':
    return Layout('grid', directory, runs, _grid_settings(directory, manifest, runs),
                  _not_started(manifest, runs), lock, manifest.get('paper'),
                  list(manifest.get('methods') or []))
  if _is_run_dir(directory):  # A run that has not written results.json yet.
    return _single(directory)
  raise ReportError(
      f'{directory} is not a tff-noisy output directory: expected a run '
      f'({_RESULTS}), a compare directory (METHOD/{_RESULTS} and comparison.csv) or a grid '
      f'directory (SETTING/seedN/METHOD/{_RESULTS} and grid.csv)')


def _single(directory: str) -> Layout:
  run = _load_run(directory, '.', os.path.basename(os.path.abspath(directory)))
  return Layout('run', directory, [run], {}, [], None if run.finished else run.lock)


def _grid_settings(directory: str, manifest: dict, runs: List[Run]) -> dict:
  """Setting directory name -> the overrides it stands for (the manifest, else grid.csv)."""
  settings = dict(manifest.get('settings') or {})
  grid_csv = os.path.join(directory, 'grid.csv')
  if not settings and os.path.exists(grid_csv):
    with open(grid_csv, newline='') as f:
      settings = {studies.setting_dir(row.get('setting', '')): row.get('setting', '')
                  for row in csv.DictReader(f)}
  for run in runs:  # Overrides unknown: written without a manifest or grid.csv.
    settings.setdefault(run.setting, '' if run.setting == 'default' else None)
  return dict(sorted(settings.items()))


def _not_started(manifest: dict, runs: List[Run]) -> list:
  """``(setting, seed, method)`` of the manifest's runs that have no directory yet."""
  present = {run.path for run in runs}
  return [(r.get('setting'), r.get('seed') if r.get('setting') else None,
           r.get('row') or r['method'])
          for r in manifest.get('runs') or [] if r.get('path') not in present]


# --------------------------------------------------------------------------- numbers


def curve(results: dict) -> List[Tuple[int, float]]:
  """(round, test accuracy) of the evaluated rounds."""
  return [(r['round'], r['test_accuracy']) for r in results.get('rounds', [])
          if r.get('test_accuracy') is not None]


def client_sizes(results: dict) -> Dict[str, int]:
  """Training examples per client, where the run recorded them (``client_sizes``)."""
  return {cid: int(n) for cid, n in (results.get('client_sizes') or {}).items()}


def estimates(results: dict) -> List[Estimate]:
  """The per-client estimates a run recorded: its method's report sections' (noise
  estimates, reliabilities, flags), and the relative aggregation weights when they were
  more than example counts (client weights not all whole numbers)."""
  found = [e for section in registry.report_sections() for e in section.estimates(results)]
  if not any(e.key == 'weights' for e in found):
    found += weights_estimate([
        dict(zip(r.get('clients') or [], r.get('client_weights') or []))
        for r in results.get('rounds', [])
        if any(w is not None and float(w) != round(float(w))
               for w in r.get('client_weights') or [])])
  return found


def estimated_summary(results: dict) -> List[str]:
  """What a run estimated, one line each, scored against the simulation's truth: each
  per-client estimate as its Pearson r with the true noise rates, then the lines of its
  method's report sections (label correction, switch round, detection, ...). Empty for a
  method that estimates nothing."""
  lines = []
  rates = results.get('client_noise_rates') or {}
  for estimate in estimates(results):
    cids = [cid for cid in estimate.values if cid in rates]
    r = pearson([rates[cid] for cid in cids], [estimate.values[cid] for cid in cids])
    if r is not None:
      lines.append(f'{estimate.label} vs true noise rate: r = {r:+.2f} over {len(cids)} '
                   'clients')
  return lines + [line for section in registry.report_sections()
                  for line in section.summary(results)]


# ---------------------------------------------------------------------------- figures


def events(results: dict) -> Dict[str, int]:
  """The rounds the method's report sections mark on the accuracy curves, by what
  happened (FedEFC's prestopping switch)."""
  found = {}
  for section in registry.report_sections():
    found.update(section.events(results))
  return found


def plot_accuracy(panels: Dict[str, Dict[str, List[List[Tuple[int, float]]]]], path: str,
                  marks: Optional[Dict[str, Dict[str, Dict[str, List[int]]]]] = None
                  ) -> None:
  """Test accuracy (%) per round, one panel per setting (title -> method -> each seed's
  curve): the mean over seeds with a band of ± one std over seeds (population std, as the
  tables); each method by display name, with the same colour, marker and line style in
  every panel. ``marks`` (title -> method -> what -> each seed's round) draws a dotted
  line at each round, in the method's colour, named in the legend."""
  plt = pyplot()
  methods = list(dict.fromkeys(m for curves in panels.values() for m in curves))
  fig, axes = plt.subplots(1, len(panels), squeeze=False, sharey=True,
                           figsize=(3.3 * len(panels) if len(panels) > 1 else 4.6, 2.9))
  legend = {}
  for ax, (title, curves) in zip(axes[0], panels.items()):
    for method, runs in curves.items():
      rounds = sorted(set.intersection(*(set(r for r, _ in points) for points in runs)))
      if not rounds:
        continue
      index, look = methods.index(method), style(methods.index(method))
      values = 100 * np.array([[dict(points)[r] for r in rounds] for points in runs])
      mean, std = values.mean(axis=0), values.std(axis=0)
      every = max(1, len(rounds) // 8)
      label = display_name(method) + (f' ({len(runs)} seeds)' if len(runs) > 1 else '')
      legend[label], = ax.plot(rounds, mean, linewidth=1.1, markersize=3.5,
                               markevery=(index * every // len(methods), every), **look)
      if len(runs) > 1:
        ax.fill_between(rounds, mean - std, mean + std, color=look['color'], alpha=0.15,
                        linewidth=0)
      for what, at in ((marks or {}).get(title, {}).get(method) or {}).items():
        for round_num in at:
          line = ax.axvline(round_num, color=look['color'], linestyle=':', linewidth=1)
        legend.setdefault(f'{display_name(method)}: {what}, one line per seed', line)
    ax.set_xlabel('round')
    ax.set_title(textwrap.fill(title, 48))
    ax.grid(alpha=0.3)
  axes[0][0].set_ylabel('test accuracy (%)')
  if legend:
    columns = min(len(legend), 2 if len(panels) == 1 else 4)
    fig.legend(list(legend.values()), list(legend), loc='upper center', frameon=False,
               bbox_to_anchor=(0.5, 0.0), ncol=columns)
  fig.tight_layout()
  save(fig, path)


# ----------------------------------------------------------------------------- report


def _groups(layout: Layout) -> Dict[Optional[str], Dict[str, List[Run]]]:
  """setting -> method -> finished runs (by seed): settings in directory order, methods
  in the manifest's (the order the study was given), any other after them by name."""
  groups: Dict[Optional[str], Dict[str, List[Run]]] = {}
  for run in layout.runs:
    if run.finished:
      groups.setdefault(run.setting, {}).setdefault(run.method, []).append(run)
  order = {method: i for i, method in enumerate(layout.methods)}
  for setting, methods in groups.items():
    for runs in methods.values():
      runs.sort(key=lambda r: (r.seed is None, r.seed))
    groups[setting] = dict(sorted(methods.items(),
                                  key=lambda item: (order.get(item[0], len(order)), item[0])))
  return groups


def _setting_title(layout: Layout, setting: Optional[str]) -> str:
  if setting is None:
    return ''
  overrides = layout.settings.get(setting)
  if overrides is None:
    return f'`{setting}`'
  return f'`{overrides}`' if overrides else 'the config as given (`default`)'


def _best_round(results: dict, final: float) -> str:
  """The best evaluated round and the fall from it to the last, against the papers'
  regime (``paper_table.REGIME_FALL``)."""
  evaluated = [(r['test_accuracy'], r['round']) for r in results.get('rounds', [])
               if r.get('test_accuracy') is not None]
  best, at = max(evaluated, key=lambda pair: (pair[0], -pair[1]))
  fall = 100 * (best - final)
  regime = 'in' if paper_table.in_regime(fall) else 'not in'
  return (f'Best {pct(mean_std([best]))}% at round {at}; it falls {fall:.1f} points from '
          f'there to the last round ({regime} the papers\' regime of a fall of at least '
          f'{paper_table.REGIME_FALL:g}).')


def _count(n: int, noun: str) -> str:
  return f'{n} {noun}' + ('' if n == 1 else 's')


def _flatten(value, prefix='') -> dict:
  if isinstance(value, dict):
    flat = {}
    for key, item in value.items():
      flat.update(_flatten(item, f'{prefix}{key}.'))
    return flat
  return {prefix[:-1]: value}


def _intro(w: Writer, layout: Layout) -> None:
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
  # No directory beyond the title's name: a report travels (it may be committed elsewhere).
  w.add(what, '', 'Written by `tff-noisy report`; the figures are the `report-*.png` files '
        'next to this file, each also as a PDF for print (`report-*.pdf`).', '')
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


def _runs_section(w: Writer, layout: Layout) -> None:
  if layout.kind == 'run' and layout.runs[0].finished:
    return
  w.add('## Runs', '')
  rows = []
  for run in layout.runs:
    if run.finished:
      status = 'finished'
      # Named, not linked: a report links only the figures it writes beside itself, so
      # a report committed without its runs has no dead link.
      link = f'`{os.path.join(run.path, _RESULTS)}`'
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


def _setup_items(config: dict) -> Dict[str, str]:
  """One run's Setup lines (label -> text) from its recorded config."""
  data, partition = config.get('data') or {}, config.get('partition') or {}
  noise, model, fl = config.get('noise') or {}, config.get('model') or {}, config.get('fl') or {}
  items = {}
  if data:
    subset = f', {data["train_subset"]} training examples' if data.get('train_subset') else ''
    items['Data'] = f'{data.get("dataset")}{subset}'
  if partition:
    items['Partition'] = f'{partition.get("name")}, {partition.get("num_clients")} clients'
  if data.get('dataset') == 'custom':  # Data given in Python: its labels as given.
    items['Noise model'] = (
        'the labels as given in Python' if noise.get('name') in (None, 'none') else
        f'{noise.get("name")}, flipping the labels given in Python')
  elif noise:
    items['Noise model'] = str(noise.get('name'))
  if model:
    items['Model'] = str(model.get('name'))
  if fl:
    per_round = (f'{fl["clients_per_round"]} clients' if fl.get('clients_per_round')
                 else f'participation {fl.get("participation")}')
    items['Training'] = (
        f'{fl.get("rounds")} rounds, {per_round} per round, '
        f'{fl.get("local_epochs")} local epoch(s), batch {fl.get("batch_size")}, '
        f'{fl.get("client_optimizer")} lr {fl.get("client_lr")} momentum '
        f'{fl.get("momentum")}, weight decay {fl.get("weight_decay")}, server lr '
        f'{fl.get("server_lr")}')
    items['Aggregator'] = str(fl.get('aggregator'))
  return items


def _setup_line(label: str, runs: List[Run], values: List[Optional[str]]) -> Optional[str]:
  """``- label: value.`` when every run has the same value; else the value per method or
  per setting (whichever fixes it), else every value found: what every run ran."""
  distinct = list(dict.fromkeys(v for v in values if v is not None))
  if not distinct:
    return None
  if len(distinct) == 1:
    return f'- {label}: {distinct[0]}.'
  for by, key in (('method', lambda r: r.method), ('setting', lambda r: r.setting)):
    found = {}
    for run, value in zip(runs, values):
      found.setdefault(key(run), set()).add(value)
    if None not in found and all(len(v) == 1 for v in found.values()):
      return (f'- {label}, by {by}: ' +
              '; '.join(f'{k}: {next(iter(v))}' for k, v in found.items()) + '.')
  return f'- {label}, differing between runs: {"; ".join(map(str, distinct))}.'


def _setup_section(w: Writer, layout: Layout, groups) -> None:
  finished = [r for r in layout.runs if r.finished]
  if not finished:
    return
  config = finished[0].results.get('config') or {}
  w.add('## Setup', '')
  items = [_setup_items(r.results.get('config') or {}) for r in finished]
  for label in ('Data', 'Partition', 'Noise model', 'Model', 'Training', 'Aggregator'):
    line = _setup_line(label, finished, [i.get(label) for i in items])
    if line:
      w.add(line)
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


def _data_section(w: Writer, layout: Layout) -> None:
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
        'shown to a method) and training examples per client (`client_sizes`).', '')
  w.table(([] if layout.kind != 'grid' else ['setting']) + [
      'seed', 'data hash', 'clients', 'noisy clients', 'mean noise rate',
      'noise rate min / median / max', 'client size min / median / max'], rows)
  if mixed:
    w.add(f'**Warning:** the methods did not all run on the same data for '
          f'{", ".join(mixed)} (different data hashes).', '')


def _accuracy_section(w: Writer, layout: Layout, groups) -> None:
  if not groups:
    return
  w.add('## Test accuracy', '')
  several = any(len(runs) > 1 for methods in groups.values() for runs in methods.values())
  window = window_label([r for methods in groups.values() for runs in methods.values()
                         for r in runs])
  if layout.kind == 'run':
    run = next(iter(next(iter(groups.values())).values()))[0]
    final, last10 = run.results.get('final_accuracy'), run.results.get('last10_accuracy')
    rounds = _count(len(run.results.get('rounds', [])), 'round')
    if final is None:
      w.add(f'No evaluated round ({rounds}).', '')
    else:
      w.add(f'Final test accuracy {pct(mean_std([final]))}%, mean of the {window} '
            f'evaluated rounds {pct(mean_std([last10]))}%, after {rounds}. '
            + _best_round(run.results, final), '')
  else:
    w.add(f'Test accuracy (%) after the last round and mean of the {window} evaluated '
          'rounds' + (', mean ± std over seeds (population std, as `grid.csv`).'
                      if several else '.'), '')
    rows = []
    for setting, methods in groups.items():
      for method, runs in methods.items():
        rows.append(([setting] if layout.kind == 'grid' else []) + [
            method, ', '.join(str(r.seed) for r in runs),
            pct(mean_std(r.results.get('final_accuracy') for r in runs)),
            pct(mean_std(r.results.get('last10_accuracy') for r in runs))])
    w.table((['setting'] if layout.kind == 'grid' else []) +
            ['method', 'seeds', 'final', window], rows)
  panels, marks, marked = {}, {}, []
  order = list((layout.paper or {}).get('settings') or {})  # A paper's table: its order.
  for setting, methods in sorted(groups.items(), key=lambda item: (
      order.index(item[0]) if item[0] in order else len(order))):
    curves = {m: [curve(r.results) for r in runs] for m, runs in methods.items()}
    curves = {m: c for m, c in curves.items() if all(c)}
    if not curves:
      continue
    title = _panel_title(layout, setting)
    panels[title] = curves
    for method, runs in methods.items():
      for run in runs:
        for what, round_num in events(run.results).items():
          marks.setdefault(title, {}).setdefault(method, {}).setdefault(what, []).append(
              round_num)
      for what, at in (marks.get(title, {}).get(method) or {}).items():
        where = f'{setting}: ' if setting is not None else ''
        marked.append(f'{method}\'s {what} ({where}round{"s" if len(at) > 1 else ""} '
                      f'{", ".join(map(str, at))})')
  if not panels:
    return
  only = next(iter(groups)) if len(groups) == 1 else None
  where = (', one panel per setting (the settings\' overrides: Setup)' if len(panels) > 1
           else f', setting {_setting_title(layout, only)}' if only is not None else '')
  w.add('Test accuracy (%) per round' + (', mean over seeds' if several else '') + where +
        '.' + (' Band: ± one std over seeds (population std, as the tables).'
               if several else '') +
        (f' Dotted lines: {"; ".join(marked)}.' if marked else ''), '')
  plot_accuracy(panels, w.figure('report-accuracy.png', 'test accuracy per round'), marks)


def _panel_title(layout: Layout, setting: Optional[str]) -> str:
  """A setting's name in figures: the paper's label of it, else its directory name."""
  if setting is None:
    return ''
  return ((layout.paper or {}).get('settings') or {}).get(setting) or setting


def label_fit(results: dict, last: int = 10) -> Optional[Tuple[float, float, int]]:
  """(clients' training accuracy, correct share of their labels, rounds) over a run's
  last ``last`` trained rounds (fewer in a shorter run), or None without the records.

  The training accuracy is the round's example-weighted running accuracy of local
  training on the labels the clients trained on; the correct share is 1 - the realised
  noise rate (``client_noise_rates``) of the same clients, weighted by their examples.
  On the given labels, an accuracy above the share means the clients fit wrong labels.
  """
  rates, sizes = results.get('client_noise_rates') or {}, client_sizes(results)
  pairs = []
  for record in results.get('rounds', []):
    clients = record.get('clients') or []
    if (record.get('train_accuracy') is None or not clients
        or any(c not in rates or not sizes.get(c) for c in clients)):
      continue
    examples = np.array([sizes[c] for c in clients], float)
    correct = 1.0 - np.array([rates[c] for c in clients], float)
    pairs.append((float(record['train_accuracy']),
                  float(correct @ examples / examples.sum())))
  if not pairs:
    return None
  accuracy, share = np.mean(pairs[-last:], axis=0)
  return float(accuracy), float(share), len(pairs[-last:])


def _label_fit_section(w: Writer, layout: Layout, groups) -> None:
  """Whether the clients fit their noisy labels: their training accuracy beside the
  share of their labels that are correct (``label_fit``), per method."""
  rows, windows = [], set()
  for setting, methods in groups.items():
    for method, runs in methods.items():
      fits = [fit for fit in (label_fit(r.results) for r in runs) if fit is not None]
      if not fits:
        continue
      accuracy, share, counts = np.array(fits).T
      windows.update(int(n) for n in counts)
      rows.append(([setting] if layout.kind == 'grid' else []) + [
          method, len(fits), pct(mean_std(accuracy)), pct(mean_std(share)),
          f'{100 * np.mean(accuracy - share):+.2f}'])
  if not rows:
    return
  w.add('## Fit to the clients\' labels', '')
  w.add('Training accuracy: the running accuracy of local training (all local steps, '
        'training mode) on the labels the clients trained on, weighted by their examples; '
        'correct share: the share of those clients\' given labels that are right (1 - '
        'their realised noise rate, weighted alike). Both are means over the '
        f'{reporting.last_label(windows)} trained rounds, then mean ± std over seeds (%). '
        'On the given labels, a training accuracy above the correct share means the '
        'clients fit wrong labels (at least the difference); a method that relabels or '
        'selects examples trains on other labels or fewer, and its accuracy is on those.',
        '')
  w.table((['setting'] if layout.kind == 'grid' else []) +
          ['method', 'seeds', 'training accuracy', 'correct share', 'difference (points)'],
          rows)


def seconds_per_round(results: dict) -> Optional[float]:
  """A run's median seconds per round (training and the method's server steps, not the
  evaluation), over its rounds after the first (which traces); None with fewer than 2."""
  seconds = [r['seconds'] for r in results.get('rounds', [])[1:] if 'seconds' in r]
  return float(np.median(seconds)) if seconds else None


def _time_section(w: Writer, layout: Layout, groups) -> None:
  """Seconds per round of each method, and its ratio to the baseline's run of the same
  setting and seed (the paper's baseline, else ``fedavg``)."""
  if layout.kind == 'run' or not groups:
    return
  baseline = (layout.paper or {}).get('baseline', 'fedavg')
  rows = []
  for setting, methods in groups.items():
    base = {r.seed: seconds_per_round(r.results) for r in methods.get(baseline, [])}
    for method, runs in methods.items():
      seconds = {r.seed: seconds_per_round(r.results) for r in runs}
      known = [s for s in seconds.values() if s is not None]
      if not known:
        continue
      ratios = [s / base[seed] for seed, s in seconds.items()
                if s is not None and base.get(seed)]
      ratio = ('' if method == baseline or not ratios else
               f'{np.median(ratios):.2f}' + (f' ({min(ratios):.2f}-{max(ratios):.2f})'
                                              if len(ratios) > 1 else ''))
      runtimes = sorted({(r.results.get('runtime') or {}).get('client_runtime')
                         for r in runs} - {None})
      rows.append(([setting] if layout.kind == 'grid' else []) + [
          method, ', '.join(runtimes), f'{np.median(known):.2f}', ratio])
  if not rows:
    return
  w.add('## Time per round', '')
  w.add('Seconds per round (training and the method\'s server steps, without the '
        'evaluation): the median over each run\'s rounds after the first, then over seeds; '
        f'x {baseline}: the median over seeds of the ratio to {baseline}\'s run of the same '
        'setting and seed (range over seeds). The runs ran one after another, so a change '
        'in the machine\'s load between them moves a ratio.', '')
  w.table((['setting'] if layout.kind == 'grid' else []) +
          ['method', 'client runtime', 's / round', f'x {baseline}'], rows)


def _estimates_section(w: Writer, layout: Layout, groups) -> None:
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
        'correlation over the clients with an estimate. In the figures each point is moved '
        f'by up to {100 * reporting.JITTER:g}% of each axis\' range so that equal values stay '
        'visible, and the solid line is the least-squares fit over all of them.', '')
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
      points[f'{seed_label(run)} (r={num(r)})'] = (x, y)
      rows.append([seed_label(run), len(cids), num(r),
                   num(estimate.recorded[1]) if estimate.recorded else 'n/a'])
    recorded = next((e.recorded for _, e in items if e.recorded), None)
    if not recorded:
      rows = [row[:-1] for row in rows]
    w.table(['run', 'clients', 'Pearson r with the true noise rate'] +
            ([recorded[0]] if recorded else []), rows)
    if len(rs) > 1:
      w.add(f'Mean r over seeds: {np.mean(rs):.3f}.', '')
    plot_scatter(points, 'true noise rate', label, f'{display_name(method)}: {label}',
                 w.figure(slug('report', setting, method, key) + '.png',
                          f'{method} {label} vs true noise rate'),
                 diagonal=items[0][1].diagonal)


def _other_section(w: Writer, groups) -> None:
  sections = registry.report_sections()
  read_rounds = {key for section in sections for key in section.round_keys}
  read_extra = {key for section in sections for key in section.extra_keys}
  rows = []
  for setting, methods in groups.items():
    for method, runs in methods.items():
      results = runs[0].results
      keys = sorted({k for r in results.get('rounds', []) for k in r}
                    - _STANDARD_KEYS - read_rounds)
      extra = {k: v for k, v in (results.get('extra') or {}).items() if k not in read_extra}
      if keys or extra:
        rows.append(([setting] if setting is not None else []) + [
            method, ', '.join(f'`{k}`' for k in keys) or '',
            scalars(extra) or ', '.join(f'`{k}`' for k in extra)])
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
    raise ReportError(f'cannot write the report into {directory}: {os_reason(e)}') from None


# What ``publish`` copies beside the runs' results.json.
_STUDY_FILES = (studies.MANIFEST_FILE, 'grid.csv', 'comparison.csv')
# DEST's record of what ``publish`` wrote there: the files a later publish replaces.
PUBLISHED_FILE = 'published.json'


def publish(directory: str, dest: str) -> Tuple[str, int, int]:
  """Copies the study in ``directory`` to ``dest`` as a folder to commit: its manifest,
  ``grid.csv`` or ``comparison.csv``, every finished run's ``results.json`` at its path
  (no checkpoints, weights, metrics or logs), then writes ``dest``'s report from them.

  So ``dest`` is itself a grid (or compare) directory: ``tff-noisy report`` reads it and a
  copy of it continues with ``--resume``, keeping those runs. ``dest/published.json``
  lists every file written there; a later ``publish`` removes those and only those, and
  refuses a ``dest`` holding anything else (named, nothing removed). Returns ``(report
  path, runs copied, runs planned)``.
  """
  layout = discover(directory)
  if layout.kind == 'run':
    raise ReportError(f'--publish: {directory} is a single run; publish a compare or grid '
                      'directory')
  source, target = os.path.realpath(directory), os.path.realpath(dest)
  if os.path.commonpath([source, target]) in (source, target):
    raise ReportError(f'--publish: {dest} must be outside {directory} (and not contain it)')
  earlier = _earlier_publish(dest)
  finished = [run for run in layout.runs if run.finished]
  copies = [name for name in _STUDY_FILES if os.path.exists(os.path.join(directory, name))]
  copies += [f'{run.path}/{_RESULTS}'.replace(os.sep, '/') for run in finished]
  try:
    for name in earlier:
      os.remove(os.path.join(dest, name))
      _remove_empty_parents(dest, os.path.dirname(name))
    _record_publish(dest, copies)  # First: a publish cut short is still replaced whole.
    for name in copies:
      with open(os.path.join(directory, name), 'rb') as f:
        files.write_file(os.path.join(dest, name), f.read())
  except OSError as e:
    raise ReportError(f'--publish: cannot write {dest}: {os_reason(e)}') from None
  before = set(os.listdir(dest))
  try:
    path, _ = write_report(dest)
  finally:  # The report and its figures, as far as they were written.
    _record_publish(dest, copies + sorted(set(os.listdir(dest)) - before))
  return path, len(finished), len(layout.runs) + len(layout.missing)


def _earlier_publish(dest: str) -> List[str]:
  """The files in ``dest`` that its ``published.json`` lists; ReportError naming anything
  else there (a folder of the user's, or one no ``publish`` wrote)."""
  if not os.path.exists(dest):
    return []
  if not os.path.isdir(dest):
    raise ReportError(f'--publish: {dest} is a file, not a directory')
  present = []
  for root, dirs, names in os.walk(dest):
    links = [name for name in dirs if os.path.islink(os.path.join(root, name))]
    for name in names + links:
      present.append(os.path.relpath(os.path.join(root, name), dest).replace(os.sep, '/'))
  record = os.path.join(dest, PUBLISHED_FILE)
  listed = set()
  if os.path.lexists(record):
    try:
      with open(record) as f:
        listed = set(json.load(f)['files'])
    except (OSError, ValueError, KeyError, TypeError):
      raise ReportError(f'--publish: {record} cannot be read as the record of an earlier '
                        '--publish; move it away or choose another DEST') from None
  foreign = [name for name in sorted(present) if name not in listed | {PUBLISHED_FILE}]
  if foreign:
    shown = ', '.join(foreign[:5]) + (f', ... ({len(foreign)} in all)' if len(foreign) > 5
                                      else '')
    raise ReportError(f'--publish: {dest} holds files no earlier --publish wrote there '
                      f'({shown}); move them away or choose another DEST (--publish '
                      f'replaces only the files its {PUBLISHED_FILE} lists)')
  return [name for name in present if name in listed]


def _remove_empty_parents(dest: str, folder: str) -> None:
  """Removes ``dest/folder`` and its parents below ``dest`` while they are empty."""
  while folder and not os.listdir(os.path.join(dest, folder)):
    os.rmdir(os.path.join(dest, folder))
    folder = os.path.dirname(folder)


def _record_publish(dest: str, names: List[str]) -> None:
  """Writes ``dest/published.json``: the files ``publish`` wrote in ``dest``."""
  files.write_file(os.path.join(dest, PUBLISHED_FILE),
                   (json.dumps({'files': sorted(names)}, indent=1) + '\n').encode())


def _write(layout: Layout) -> Tuple[str, List[str]]:
  directory = layout.directory
  groups = _groups(layout)
  w = Writer(directory)
  _intro(w, layout)
  if layout.paper:
    paper_table.render(w, groups, layout.paper)
  _accuracy_section(w, layout, groups)
  _label_fit_section(w, layout, groups)
  _time_section(w, layout, groups)
  _estimates_section(w, layout, groups)
  for section in registry.report_sections():
    section.render(w, groups)
  _other_section(w, groups)
  _setup_section(w, layout, groups)
  _data_section(w, layout)
  _runs_section(w, layout)
  path = os.path.join(directory, REPORT_FILE)
  files.write_file(path, ('\n'.join(w.lines).rstrip() + '\n').encode())
  return path, w.figures
