"""``tff-noisy reproduce PAPER``: a paper's table run as a grid and shown beside the
paper's own numbers.

A paper's protocol is data, ``experiments/protocols/<paper>.yaml``: under ``tables``,
for each results table, where the numbers are (``cite``), the paper's metric (best
round, mean of the last 10 rounds, final), its settings (noise columns) as config
overrides, the methods it compares that this project implements, and the paper's number
for every cell, copied from the paper; under ``scales``, how this project
runs each table (a config, overrides, settings, methods, seeds, and what was measured).
A table's row is a method's name, or a row id the protocol declares under ``rows``: a
method run with overrides of its own (TrimmedMean: ``fedavg`` with the ``trimmed_mean``
aggregator), in ``SETTING/seedN/ROW``, reported under the row's label. Two scales:

- ``cpu``: a protocol that finishes on 2 CPU cores (Fashion-MNIST or digits), in the
  regime the paper studies (FedAvg's accuracy peaks, then falls as it fits the wrong
  labels; the protocol says what was measured);
- ``paper``: the paper's dataset, model, clients and rounds (CIFAR through TFDS; for a
  GPU machine), checked up front: the dataset must be on disk.

The grid is ``studies.grid`` with the table in its manifest; ``tff-noisy report`` then
adds the table beside the paper's (``report.paper_table``). TensorFlow-free.
"""

import dataclasses
import os
import re
from typing import Dict, List, NamedTuple, Optional

from tff_noisy import config as config_lib
from tff_noisy import methods as method_registry
from tff_noisy import yamlio
from tff_noisy.errors import ConfigError
from tff_noisy.params import did_you_mean
from tff_noisy.report.paper_table import METRICS
from tff_noisy.simulation import studies

PROTOCOL_DIR = os.path.join(os.path.dirname(__file__), '..', 'experiments', 'protocols')
SCALES = ('cpu', 'paper')
# The paper-scale fields of a protocol and the config fields they set.
_PAPER_FIELDS = {'dataset': 'data.dataset', 'model': 'model.name',
                 'clients': 'partition.num_clients', 'participation': 'fl.participation',
                 'rounds': 'fl.rounds', 'local_epochs': 'fl.local_epochs',
                 'batch_size': 'fl.batch_size'}
_ROW_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]*')  # A row's directory name.
_ROW_KEYS = ('method', 'set')
_METHOD_KEY = 'method.name'


@dataclasses.dataclass(frozen=True)
class Scale:
  """How one scale runs a table: a config, overrides for every cell, per-setting ones."""
  config: str  # Relative to the repository root.
  overrides: list
  settings: Dict[str, list]  # Setting id -> its overrides at this scale.
  methods: list
  seeds: list
  note: str  # What differs from the paper, and the regime measured (cpu).
  minutes_per_cell: Optional[float] = None  # Measured on this project's machine.
  # Method -> overrides for its runs at this scale only, applied after the table's
  # ``method_set`` (e.g. a baseline's stage lengths rescaled to the scale's rounds).
  method_set: Dict[str, list] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Table:
  paper: str
  id: str
  citation: str
  cite: str
  caption: str
  metric: str
  metric_note: str
  methods: Dict[str, str]  # Our method name or row id -> the paper's row label.
  baseline: str  # The method the others are compared with (the protocol's ``baseline``).
  settings: Dict[str, str]  # Setting id -> the paper's label.
  paper_numbers: Dict[str, Dict[str, Optional[float]]]  # Setting -> method -> value (%).
  scales: Dict[str, Scale]
  # Method -> overrides for its runs only, last (the protocol's ``method_set``: e.g. the
  # paper's method aggregates with another rule than its baselines; then the table's own
  # ``method_set``, which wins: e.g. a baseline's schedule differs per dataset).
  method_overrides: Dict[str, list] = dataclasses.field(default_factory=dict)
  # When the paper does not say which round it reports (``metric: unstated``), how this
  # project reads it (``metric_reading``, one of ``METRICS``); the report's headline.
  metric_reading: Optional[str] = None
  # Row id -> the method it runs, for the table's rows that are not a method's name (the
  # protocol's ``rows``); its overrides, ``method.name`` first, are in method_overrides.
  rows: Dict[str, str] = dataclasses.field(default_factory=dict)

  def method_overrides_at(self, scale: str,
                          methods: Optional[list] = None) -> Dict[str, list]:
    """The method overrides of the methods run: ``methods`` (``--methods``), default
    every one ``scale`` runs; the scale's own ``method_set`` after the table's."""
    run = self.scales[scale].methods if methods is None else methods
    own = self.scales[scale].method_set
    return {m: _later_wins(self.method_overrides.get(m, []), own.get(m, []))
            for m in run if m in self.method_overrides or m in own}

  def study(self, scale: str, extra: Optional[list] = None,
            methods: Optional[list] = None) -> dict:
    """What ``manifest.json`` keeps of the table for the report (``extra``: the
    command's ``--set`` overrides; ``methods``: the methods run, default every one)."""
    return {'paper': self.paper, 'table': self.id, 'citation': self.citation,
            'cite': self.cite, 'caption': self.caption, 'metric': self.metric,
            'metric_note': self.metric_note, 'metric_reading': self.metric_reading,
            'methods': self.methods,
            'baseline': self.baseline,
            'settings': self.settings, 'numbers': self.paper_numbers, 'scale': scale,
            'scale_note': self.scales[scale].note,
            'method_overrides': self.method_overrides_at(scale, methods),
            'rows': {row: method for row, method in self.rows.items()
                     if row in (self.scales[scale].methods if methods is None else methods)},
            'extra_overrides': list(extra or [])}


def papers() -> List[str]:
  return sorted(name[:-5] for name in os.listdir(PROTOCOL_DIR) if name.endswith('.yaml'))


def _number(cell) -> Optional[float]:
  value = cell.get('value') if isinstance(cell, dict) else cell
  return None if value is None else float(value)


def load(paper: str) -> Dict[str, Table]:
  """The tables of ``paper``'s protocol; ConfigError naming the papers for another name."""
  if paper not in papers():
    raise ConfigError(f"reproduce: unknown paper '{paper}'{did_you_mean(paper, papers())} "
                      f"Allowed: {', '.join(papers())}")
  with open(os.path.join(PROTOCOL_DIR, f'{paper}.yaml')) as f:
    protocol = yamlio.load(f)
  rows = _rows(paper, protocol.get('rows'))
  method_overrides = {name: list(values) for name, values in rows.items()}
  for name, values in (protocol.get('method_set') or {}).items():
    _no_method_name(f'protocol {paper}', name, values)
    method_overrides[name] = _later_wins(method_overrides.get(name, []), values)
  tables = {}
  for table_id, table in protocol['tables'].items():
    _check_names(f'protocol {paper}, table {table_id}', table['methods'], rows)
    settings = {s['id']: s.get('label', s['id']) for s in table['settings']}
    paper_overrides = {s['id']: list(s['overrides']) for s in table['settings']}
    scales = {}
    for scale in SCALES:
      spec = (protocol.get('scales') or {}).get(table_id, {}).get(scale)
      if spec:
        scales[scale] = _scale(paper, table_id, scale, spec, table, paper_overrides)
    tables[table_id] = Table(
        paper, table_id, protocol.get('citation', ''), table['cite'], table['caption'],
        table['metric'], table.get('metric_note', ''), dict(table['methods']),
        protocol['baseline'], settings,
        {sid: {m: _number(c) for m, c in (row or {}).items()}
         for sid, row in (table.get('paper_numbers') or {}).items()}, scales,
        _method_set(f'protocol {paper}, table {table_id}', table['methods'],
                    table.get('method_set'), method_overrides),
        _reading(paper, table_id, table),
        {row: rows[row][0].split('=', 1)[1] for row in table['methods'] if row in rows})
  return tables


def _rows(paper: str, spec) -> Dict[str, list]:
  """The protocol's ``rows``: row id -> its overrides, ``method.name=M`` first, then its
  ``set``. A row id is not a method's name; ConfigError naming the field otherwise."""
  where = f'protocol {paper}: rows'
  if spec is None:
    return {}
  if not isinstance(spec, dict):
    raise ConfigError(f'{where}: expected a mapping of row id -> {{method: M, set: [...]}}')
  rows = {}
  for row, fields in spec.items():
    at = f'{where}.{row}'
    if not isinstance(row, str) or not _ROW_ID.fullmatch(row):
      raise ConfigError(f"{where}: row id {row!r}: expected letters, digits, '_', '.' and "
                        "'-' (it names the run's directory)")
    if row in method_registry.METHODS:
      raise ConfigError(f"{at}: '{row}' is a method's name; a row needs a name of its own "
                        f'(the method it runs goes in {at}.method)')
    if not isinstance(fields, dict):
      raise ConfigError(f'{at}: expected a mapping with {" and ".join(_ROW_KEYS)}')
    for key in fields:
      if key not in _ROW_KEYS:
        raise ConfigError(f"{at}: unknown key '{key}'{did_you_mean(key, _ROW_KEYS) or '.'} "
                          f'Allowed: {", ".join(_ROW_KEYS)}')
    method = fields.get('method')
    if method not in method_registry.METHODS:
      raise ConfigError(
          f'{at}.method: ' + ('missing' if method is None else
                              f"unknown method '{method}'"
                              f"{did_you_mean(str(method), method_registry.METHODS)}")
          + '; it names the method the row runs (tff-noisy list methods)')
    overrides = fields.get('set') or []
    if not isinstance(overrides, list) or not all(
        isinstance(o, str) and '=' in o for o in overrides):
      raise ConfigError(f'{at}.set: expected a list of key=value overrides')
    if any(_sets_method(o) for o in overrides):
      raise ConfigError(f"{at}.set: sets {_METHOD_KEY}; the row's method is {at}.method")
    rows[row] = [f'{_METHOD_KEY}={method}'] + list(overrides)
  return rows


def _sets_method(override: str) -> bool:
  return override.split('=', 1)[0].strip() == _METHOD_KEY


def _no_method_name(where: str, name: str, values: list) -> None:
  """A ``method_set`` entry keeps its method: another method is a row (``rows``)."""
  if any(_sets_method(value) for value in values):
    raise ConfigError(f'{where}: method_set.{name} sets {_METHOD_KEY}; a method run under '
                      'overrides of its own is a row: rows: {ROW: {method: M, set: [...]}}')


def _check_names(where: str, names, rows: dict) -> None:
  """Each of a table's ``names`` is a method's or one of the protocol's ``rows``."""
  known = list(method_registry.METHODS) + list(rows)
  for name in names:
    if name not in known:
      raise ConfigError(f"{where}: methods names '{name}', neither a method nor one of "
                        f"the protocol's rows{did_you_mean(name, known) or '.'} Rows: "
                        f"{', '.join(rows) or 'none'}")


def _method_set(where: str, methods, own: Optional[dict], inherited: dict) -> dict:
  """The overrides of each of ``methods``: the ``inherited`` ones (the protocol's
  ``method_set``), then ``own`` (a table's or a scale's, applied after, so they win);
  ``where`` ('protocol P, table T') names the place of a wrong name."""
  merged = {name: list(values) for name, values in inherited.items()}
  for name, values in (own or {}).items():
    _no_method_name(where, name, values)
    if name not in methods:
      raise ConfigError(f"{where}: method_set names '{name}', "
                        f"not one of the table's methods: {', '.join(methods)}")
    merged[name] = _later_wins(merged.get(name, []), values)
  return {name: values for name, values in merged.items() if name in methods}


def _later_wins(first: list, then: list) -> list:
  """``first`` then ``then`` as ``--set`` overrides, one per key: a key set again keeps
  its place and takes the later value (what applying both in order gives)."""
  merged = {}
  for override in list(first) + list(then):
    merged[override.split('=', 1)[0]] = override
  return list(merged.values())


def _reading(paper: str, table_id: str, table: dict) -> Optional[str]:
  reading = table.get('metric_reading')
  if reading is not None and (reading not in METRICS or table['metric'] in METRICS):
    raise ConfigError(f'protocol {paper}, table {table_id}: metric_reading {reading!r} '
                      f'needs metric: unstated and one of {", ".join(METRICS)}')
  return reading


def _scale(paper: str, table_id: str, scale: str, spec: dict, table: dict,
           paper_overrides: dict) -> Scale:
  """A scale of ``table``. ``spec.settings``: the setting ids it runs (default every
  one), as a list, or a mapping to overrides replacing the paper's (null: the paper's)."""
  overrides = list(spec.get('set') or [])
  if scale == 'paper':  # The paper's fields first; the scale's own overrides win.
    fields = table.get('paper_scale') or {}
    paper_fields = [f'{key}={fields[name]}' for name, key in _PAPER_FIELDS.items()
                    if fields.get(name) is not None]
    if fields.get('participation') is not None:  # The paper's fraction of the clients
      paper_fields.append('fl.clients_per_round=null')  # wins over the config's count.
    overrides = paper_fields + list(fields.get('partition') or []) + overrides
  chosen = spec.get('settings') or list(paper_overrides)
  if not isinstance(chosen, dict):
    chosen = {sid: None for sid in chosen}
  for sid in chosen:
    if sid not in paper_overrides:
      raise ConfigError(f"protocol: setting '{sid}' of scale {scale} is not one of the "
                        f"table's: {', '.join(paper_overrides)}")
  for name in spec.get('methods') or []:
    if name not in table['methods']:
      raise ConfigError(f"protocol {paper}, table {table_id} (scale {scale}): methods names "
                        f"'{name}', not one of the table's: {', '.join(table['methods'])}")
  return Scale(spec['config'], overrides,
               {sid: list(paper_overrides[sid] if own is None else own)
                for sid, own in chosen.items()},
               list(spec.get('methods') or table['methods']),
               list(spec.get('seeds') or [0, 1, 2]), spec.get('note', ''),
               spec.get('minutes_per_cell'),
               _method_set(f'protocol {paper}, table {table_id} (scale {scale})',
                           table['methods'], spec.get('method_set'), {}))


def table_of(paper: str, table: Optional[str], scale: Optional[str] = None) -> Table:
  """``paper``'s table ``table``; None: its first with a protocol at ``scale`` (its
  first table when ``scale`` is None or none has one)."""
  tables = load(paper)
  if table is None:
    return next((t for t in tables.values() if scale in t.scales),
                next(iter(tables.values())))
  if table not in tables:
    raise ConfigError(f"--table: '{paper}' has no table '{table}'"
                      f"{did_you_mean(table, tables)} Allowed: {', '.join(tables)}")
  return tables[table]


def listing(paper: Optional[str] = None) -> str:
  """Every paper's (or only ``paper``'s) tables and scales, with a measured time per
  cell where there is one, and the names ``--methods`` takes (a row: with its method)."""
  lines = []
  for paper in [paper] if paper else papers():
    tables = load(paper)
    first = next(iter(tables.values()))
    lines.append(f'{paper}: {first.citation}')
    for table in tables.values():
      lines.append(f'  --table {table.id}: {table.cite}, {_count(table.settings, "setting")} x '
                   f'{_count(table.methods, "method")}; metric {table.metric}'
                   + (f' (read as {table.metric_reading})' if table.metric_reading else '')
                   + ('' if table.scales else '; no scale to run it yet'))
      for name, scale in table.scales.items():
        cells = len(scale.settings) * len(scale.methods) * len(scale.seeds)
        if scale.minutes_per_cell:
          time = (f'~{scale.minutes_per_cell:g} min per cell on 2 CPU cores, '
                  f'~{cells * scale.minutes_per_cell / 60:.1f} h in all')
        else:
          time = ('for a GPU machine; time not measured' if name == 'paper'
                  else 'time per cell not measured yet')
        lines.append(f'    --scale {name}: {cells} cells ({len(scale.seeds)} seeds); {time}')
        rows = [f'{m} ({table.rows[m]})' for m in scale.methods if m in table.rows]
        lines.append(f'      --methods {",".join(scale.methods)}'
                     + (f'; rows: {", ".join(rows)}' if rows else ''))
  return '\n'.join(lines)


def _count(items, noun: str) -> str:
  return f'{len(items)} {noun}' + ('' if len(items) == 1 else 's')


class Plan(NamedTuple):
  """What ``studies.grid`` runs for one table at one scale."""
  config_path: str
  overrides: list  # For every cell: the scale's, then the command's ``--set``.
  methods: list
  settings: list  # studies.Setting each.
  seeds: list
  method_overrides: Dict[str, list]  # Method -> its own overrides (``Table``).


def plan(table: Table, scale: str, seeds: Optional[list] = None,
         extra: Optional[list] = None, settings: Optional[list] = None,
         methods: Optional[list] = None) -> Plan:
  """The grid of ``table`` at ``scale``; ``extra``: ``--set`` overrides for every cell
  (where a setting sets the same field, the setting wins); ``settings``, ``methods``:
  only these of the scale's (``--settings``, ``--methods``: one row of a long table).

  ``--scale paper`` is checked here, before any work: the dataset must be on disk.
  """
  if scale not in table.scales:
    raise ConfigError(f"--scale: table '{table.id}' of '{table.paper}' has no '{scale}' "
                      f"protocol; it has {', '.join(table.scales) or 'none'}")
  spec = table.scales[scale]
  root = os.path.join(os.path.dirname(__file__), '..')
  config_path = os.path.join(root, spec.config)
  where = f"table '{table.id}' at scale {scale}"
  grid_settings = [studies.Setting(sid, spec.settings[sid], ','.join(spec.settings[sid]))
                   for sid in _subset('--settings', settings, list(spec.settings), where)]
  grid_methods = _subset('--methods', methods, spec.methods, where)
  methods_of = {name: table.rows.get(name, name) for name in spec.methods}
  overrides = _params_of(spec.overrides, [methods_of[m] for m in spec.methods],
                         [methods_of[m] for m in grid_methods]) + list(extra or [])
  if scale == 'paper':
    config = config_lib.load(config_path, overrides + grid_settings[0].overrides)
    _check_dataset_present(config)
  return Plan(config_path, overrides, grid_methods, grid_settings, list(seeds or spec.seeds),
              table.method_overrides_at(scale, grid_methods))


def _params_of(overrides: list, scale_methods: list, chosen: list) -> list:
  """The scale's ``overrides`` without the ``method.params`` that only methods left out
  by ``--methods`` take (SymCE's alpha when SymCE does not run): each run keeps the
  params its method takes, so the cells are those of the whole grid."""
  taken = {key for name in chosen for key in method_registry.param_names(name)}
  others = {key for name in scale_methods if name not in chosen
            for key in method_registry.param_names(name)} - taken
  prefix = 'method.params.'
  return [o for o in overrides
          if not (o.startswith(prefix) and o.split('=', 1)[0][len(prefix):] in others)]


def _subset(flag: str, chosen: Optional[list], allowed: list, where: str) -> list:
  """``chosen`` (in the protocol's order), or every one of ``allowed`` when None."""
  if chosen is None:
    return list(allowed)
  if not chosen:
    raise ConfigError(f'{flag}: name at least one of {", ".join(allowed)}')
  for name in chosen:
    if name not in allowed:
      raise ConfigError(f"{flag}: {where} has no '{name}'"
                        f"{did_you_mean(name, allowed) or '.'} Allowed: {', '.join(allowed)}")
  return [name for name in allowed if name in chosen]


def _check_dataset_present(config) -> None:
  from tff_noisy.data import sources  # pylint: disable=g-import-not-at-top
  try:
    sources.load_dataset(config.data.dataset, config.data.data_dir)
  except sources.DatasetError as e:
    raise ConfigError(f'--scale paper: {e}') from None
