"""Several runs as one study: ``compare`` (methods on identical data) and ``grid``
(methods x settings x seeds), each written with a manifest of what it runs.

``OUT/manifest.json`` is written before the first run: the study's kind, its methods,
seeds and settings (directory name -> ``--set`` overrides) and every planned run's
directory, method, setting and seed, and its row where a grid's name is a row (a
protocol's, ``reproduce``: a method under overrides of its own, not the method's name).
``tff-noisy report`` reads it to lay the study out, to name each row's runs by the row
and to name the runs not started yet. TensorFlow-free: ``run`` (one experiment) is
passed in, with each run's config already validated (``validation.Choices``).
"""

import copy
import csv
import dataclasses
import io
import json
import os
import sys
from typing import Callable, Dict, List, NamedTuple, Optional

import numpy as np

from tff_noisy import config as config_lib
from tff_noisy import files
from tff_noisy import methods
from tff_noisy import reporting
from tff_noisy import validation
from tff_noisy.errors import UserError
from tff_noisy.simulation import results as results_lib

MANIFEST_FILE = 'manifest.json'


@dataclasses.dataclass(frozen=True)
class PlannedRun:
  path: str  # Relative to the study's directory.
  method: str
  config: config_lib.ExperimentConfig
  choices: validation.Choices  # Its validated choices: the run does not check it again.
  setting: Optional[str] = None  # A grid's setting directory; None in a compare.
  seed: Optional[int] = None
  row: Optional[str] = None  # A grid's row that is not its method's name (``row_method``).

  @property
  def name(self) -> str:
    """What the study's tables call the run: its row, else its method."""
    return self.row or self.method


def method_config(config: config_lib.ExperimentConfig, method: str):
  """``config`` with ``method``, keeping the config's method params that ``method`` takes.

  So a fedln config's k and R_c also apply to fedln_nnc and fedln_nafedavg. The result
  is validated whole (every registry's choices), before any run starts.
  """
  return _validated_method_config(config, method)[0]


def _validated_method_config(config, method: str, data=None, model_fn=None) -> tuple:
  """``(method_config(config, method), its validation.Choices)``; ``data``,
  ``model_fn``: the user's own (``validation.validate_experiment``)."""
  values = copy.deepcopy(config.to_dict())
  accepted = methods.param_names(method) if method in methods.METHODS else ()
  params = {k: v for k, v in values['method']['params'].items() if k in accepted}
  values['method'] = {'name': method, 'params': params}
  resolved = config_lib.from_dict(values)
  return resolved, validation.validate_experiment(resolved, data, model_fn)


def method_configs(config: config_lib.ExperimentConfig, names: list, data=None,
                   model_fn=None) -> dict:
  """``{method: (config, choices)}`` for each of ``names`` (``method_config``), every
  one validated before any run (on the user's ``data`` and ``model_fn``, if given).

  The config's method.params may name the parameters of its own method and of any
  compared method (e.g. FedLN's R_c beside MaskedOptim's T_w); each method keeps the ones
  it takes. A parameter that none of them takes is an error, as it is for a single run.
  """
  configs = {name: _validated_method_config(config, name, data, model_fn) for name in names}
  own = [config.method.name] if config.method.name in methods.METHODS else []
  taken = {key for name in names + own for key in methods.param_names(name)}
  for key in config.method.params:
    if key not in taken:
      owners = methods.param_owners(key)
      belongs = f" (it belongs to {', '.join(owners)})" if owners else ''
      raise config_lib.ConfigError(
          f"method.params.{key}: neither the config's method ({config.method.name}) nor "
          f"a compared one ({', '.join(names)}) takes it{belongs}")
  return configs


def setting_dir(setting: str) -> str:
  """The directory a grid names a ``--setting`` (``k=v,k=v``) by: one folder name, with
  no path separator and no ``..`` (a value such as ``data.data_dir=../x`` stays inside)."""
  name = setting.replace(',', '_').replace('=', '-')
  for separator in {'/', '\\', os.sep}:
    name = name.replace(separator, '_')
  return name.replace('..', '__') or 'default'


class Setting(NamedTuple):
  """One setting of a grid: its directory name, its ``--set`` overrides and the label
  ``grid.csv`` and the report show (a ``--setting`` as the user wrote it)."""
  name: str
  overrides: list
  label: str

  @classmethod
  def parse(cls, text: str) -> 'Setting':
    """A ``--setting`` ``k=v,k=v`` ('' for the config as given)."""
    return cls(setting_dir(text), [kv for kv in text.split(',') if kv], text)


def plan_compare(config: config_lib.ExperimentConfig, names: list, data=None,
                 model_fn=None) -> List[PlannedRun]:
  """One run per method, in ``OUT/METHOD``; every config validated first."""
  return [PlannedRun(name, name, method_cfg, choices) for name, (method_cfg, choices)
          in method_configs(config, names, data, model_fn).items()]


def row_method(name: str, overrides: list) -> str:
  """The method a grid's ``name`` runs: ``name`` when it is a method's; else ``name`` is a
  row, which runs the method its ``overrides`` name (``method.name=M``, last wins), or is
  left to validation to refuse (an unknown method). ConfigError for a method's name whose
  overrides name another method: a row of another method needs a name of its own."""
  named = [o.split('=', 1)[1].strip() for o in overrides
           if o.split('=', 1)[0].strip() == 'method.name']
  if name in methods.METHODS:
    if any(other != name for other in named):
      raise config_lib.ConfigError(
          f'{name}: its overrides set method.name={named[-1]}; a method\'s runs keep its '
          'name (a row of another method needs a name that is not a method\'s)')
    return name
  return named[-1] if named else name


def plan_grid(config_path: str, overrides: list, names: list, settings: List[Setting],
              seeds: list, method_overrides: Optional[Dict[str, list]] = None,
              imports: tuple = ()) -> List[PlannedRun]:
  """Every method x setting x seed, in ``OUT/SETTING/seedN/METHOD``; validated first.

  ``method_overrides``: name -> ``--set`` overrides applied last to that name's runs only
  (a paper's methods that aggregate differently, say). A name that is not a method's is a
  row: its overrides name the method it runs (``row_method``), its runs go in
  ``OUT/SETTING/seedN/ROW`` with ``row`` set. ``imports``: modules added to every run's
  ``imports`` (``--import``, ``config.load``).
  """
  method_overrides = method_overrides or {}
  method_of = {name: row_method(name, method_overrides.get(name, [])) for name in names}
  runs = []
  for setting in settings:
    for seed in seeds:
      cell = overrides + setting.overrides + [f'seed={seed}']
      configs = method_configs(config_lib.load(config_path, cell, imports),
                               list(dict.fromkeys(method_of.values())))
      for name in names:
        method = method_of[name]
        if method_overrides.get(name):
          own = config_lib.load(config_path, cell + method_overrides[name], imports)
          method_cfg, choices = _validated_method_config(own, method)
        else:
          method_cfg, choices = configs[method]
        runs.append(PlannedRun(os.path.join(setting.name, f'seed{seed}', name), method,
                               method_cfg, choices, setting.name, seed,
                               None if name == method else name))
  return runs


def write_manifest(out: str, kind: str, runs: List[PlannedRun], methods_run: list,
                   seeds: Optional[list] = None,
                   settings: Optional[Dict[str, str]] = None,
                   paper: Optional[dict] = None) -> None:
  """Writes ``OUT/manifest.json`` (see the module doc); ``paper``: what a reproduced
  table is compared with (``reproduce``)."""
  manifest = {'kind': kind, 'methods': list(methods_run), 'seeds': seeds,
              'settings': settings, 'paper': paper,
              'runs': [{'path': r.path, 'method': r.method, 'setting': r.setting,
                        'seed': r.seed, **({'row': r.row} if r.row else {})}
                       for r in runs]}
  files.write_atomically(os.path.join(out, MANIFEST_FILE),
                         (json.dumps(manifest, indent=1) + '\n').encode())


def read_manifest(directory: str) -> Optional[dict]:
  """``DIR/manifest.json``, or None if there is none or it cannot be read."""
  try:
    with files.open_regular(os.path.join(directory, MANIFEST_FILE), 'r') as f:
      manifest = json.load(f)
  except (OSError, ValueError):
    return None
  return manifest if isinstance(manifest, dict) else None


RunAll = Callable[[List['PlannedRun']], Dict[str, dict]]  # run_processes.run_all, bound.


def compare(config: config_lib.ExperimentConfig, names: list, out: str,
            run: Callable, run_all: Optional[RunAll] = None, data=None,
            model_fn=None) -> list:
  """Runs ``names`` on identical data into ``OUT/METHOD`` (``run(config, out_dir,
  choices)`` each, one at a time, or ``run_all(planned runs)`` at once: ``run_processes``);
  writes the manifest first, then ``comparison.csv`` and ``comparison.png``. Returns
  ``[(method, results)]``. ``data``, ``model_fn``: the user's own, which ``run`` trains
  on (``run_all`` cannot hand them to other processes)."""
  if run_all is not None and (data is not None or model_fn is not None):
    raise ValueError('data, model_fn: given in Python, so the methods run in this process, '
                     'one at a time (no --jobs)')
  os.makedirs(out, exist_ok=True)
  planned = plan_compare(config, names, data, model_fn)
  write_manifest(out, 'compare', planned, names, [config.seed])
  if run_all is None:
    done = [(r.method, run(r.config, os.path.join(out, r.path), r.choices)) for r in planned]
  else:
    loaded = run_all(planned)
    done = [(r.method, results_lib.Results.from_dict(loaded[r.path])) for r in planned]
  table = io.StringIO(newline='')
  writer = csv.writer(table)
  writer.writerow(['method', 'final_accuracy', 'last10_accuracy'])
  writer.writerows((name, r.final_accuracy, r.last10_accuracy) for name, r in done)
  files.write_file(os.path.join(out, 'comparison.csv'), table.getvalue().encode())
  _plot({name: [(e['round'], e['test_accuracy']) for e in r.evaluated] for name, r in done},
        os.path.join(out, 'comparison.png'))
  return done


def grid(config_path: str, overrides: list, names: list, settings: List[Setting],
         seeds: list, out: str, run: Callable, paper: Optional[dict] = None,
         method_overrides: Optional[Dict[str, list]] = None,
         run_all: Optional[RunAll] = None,
         keep_finished: bool = False, on_workers: bool = False, imports: tuple = ()) -> str:
  """Runs every method x setting x seed (``run(config, out_dir, choices)`` each, one at a
  time) after writing the manifest; writes ``grid.csv`` and ``grid.md``; returns the
  Markdown table. ``method_overrides``: see ``plan_grid``. ``run_all``: runs the planned
  runs instead, in any order or at once (``run_processes``), and returns each one's
  results (``results.load``) by its path. ``keep_finished`` (``--resume``): a run
  already finished with the same config (``finished_results``; ``on_workers``: the runs
  go to TFF workers, which decides the runtime ``auto`` means) is kept, not started
  again. ``imports``: see ``plan_grid``."""
  settings = settings or [Setting.parse('')]
  planned = plan_grid(config_path, overrides, names, settings, seeds, method_overrides,
                      imports)
  root = os.path.realpath(out)
  for r in planned:
    if os.path.commonpath([root, os.path.realpath(os.path.join(out, r.path))]) != root:
      raise UserError(f'grid: the run {r.path!r} would be written outside --out {out}')
  os.makedirs(out, exist_ok=True)
  write_manifest(out, 'grid', planned, names, seeds, {s.name: s.label for s in settings},
                 paper)
  scores = {}  # Run path -> (final, last-10 accuracy).
  if keep_finished:
    for r in planned:
      done = finished_results(os.path.join(out, r.path), r.config, on_workers)
      if done is not None:
        scores[r.path] = (done['final_accuracy'], done['last10_accuracy'])
  to_run = [r for r in planned if r.path not in scores]
  if scores:
    print(f'[grid] {len(scores)} of {len(planned)} cells finished earlier with the same '
          f'config: kept; {len(to_run)} to run', file=sys.stderr, flush=True)
  if run_all is None:
    for number, r in enumerate(to_run, 1):
      print(f'[grid] cell {number} of {len(to_run)}: {r.path}', file=sys.stderr, flush=True)
      results = run(r.config, os.path.join(out, r.path), r.choices)
      scores[r.path] = (results.final_accuracy, results.last10_accuracy)
  else:
    for path, done in run_all(to_run).items():
      scores[path] = (done['final_accuracy'], done['last10_accuracy'])
  by_cell = {}
  for r in planned:
    by_cell.setdefault((r.setting, r.name), []).append(scores[r.path])
  return _write_grid(out, seeds, names, settings, by_cell)


def finished_results(run_dir: str, config: config_lib.ExperimentConfig,
                     on_workers: bool = False) -> Optional[dict]:
  """The results of the run finished in ``run_dir`` with exactly ``config`` (its client
  runtime resolved as the run resolved it: ``auto`` is recorded as the runtime it chose)
  and the same method parameters, defaults included (a default changed since makes
  another run, but a parameter added since, at the value its absence means, is not:
  ``Params.added_fields``); None when it has not finished (a run writes its results file
  last) or ran another config. Its ``imports`` may differ (where the code is found, as on
  resume)."""
  config = config_lib.resolve_client_runtime(config, on_workers)
  try:
    done = results_lib.load(run_dir)
  except (FileNotFoundError, UserError):
    return None
  resolved = methods.resolve_params(config.method.name, config.method.params,
                                    config.fl.rounds)
  def run_config(values):  # As the file has it, without imports.
    return {key: value for key, value in json.loads(json.dumps(values)).items()
            if key != 'imports'}

  def identifying(params):  # A field added since, at the value its absence means, is left out.
    return type(resolved).identifying(json.loads(json.dumps(params)))

  same = (run_config(done['config']) == run_config(config.to_dict())
          and isinstance(done.get('params'), dict)
          and identifying(done['params']) == identifying(dataclasses.asdict(resolved)))
  return done if same else None


def _write_grid(out: str, seeds: list, names: list, settings: List[Setting],
                scores: dict) -> str:
  """Writes grid.csv and grid.md (mean and std over seeds); returns the markdown table."""
  lines = ['| setting | ' + ' | '.join(names) + ' |', '|---|' + '---|' * len(names)]
  rows = io.StringIO(newline='')
  writer = csv.writer(rows)
  writer.writerow(['setting', 'method', 'seeds', 'final_mean', 'final_std', 'last10_mean',
                   'last10_std'])
  for setting in settings:
    cells = []
    for name in names:
      values = np.array(scores[(setting.name, name)])
      mean, std = values.mean(axis=0), values.std(axis=0)
      writer.writerow([setting.label, name, len(values), mean[0], std[0], mean[1], std[1]])
      cells.append(f'{100 * mean[0]:.2f} ± {100 * std[0]:.2f} / '
                   f'{100 * mean[1]:.2f} ± {100 * std[1]:.2f}')
    lines.append(f'| {setting.label or "(config)"} | ' + ' | '.join(cells) + ' |')
  table = '\n'.join(lines)
  files.write_file(os.path.join(out, 'grid.csv'), rows.getvalue().encode())
  files.write_file(os.path.join(out, 'grid.md'), (
      f'Test accuracy (%), final / mean of the last 10 rounds, mean ± std over '
      f'seeds {",".join(str(s) for s in seeds)}\n\n{table}\n').encode())
  return table


def _plot(curves, path) -> None:
  plt = reporting.pyplot()
  fig, ax = plt.subplots(figsize=(6, 4))
  for name, points in curves.items():
    ax.plot([p[0] for p in points], [p[1] for p in points], label=name)
  ax.set_xlabel('round')
  ax.set_ylabel('test accuracy')
  ax.legend()
  ax.grid(alpha=0.3)
  reporting.save(fig, path)
