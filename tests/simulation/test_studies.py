"""``studies``: compare and grid as library calls that write a manifest before any run,
and the report laid out from it. ``run`` is a stand-in that writes a small results.json."""
import csv
import dataclasses
import json

import pytest

from tff_noisy import config as config_lib
from tff_noisy import validation
from tff_noisy.report import command as report
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import studies

_CONFIG = {'data': {'dataset': 'digits'}, 'partition': {'name': 'iid', 'num_clients': 4},
           'method': {'name': 'fedln', 'params': {'k': 7, 'activation_round': 2}},
           'fl': {'rounds': 3}}


def _recording_run(calls, out_root, manifest_seen):
  def run(config, out, choices):
    assert choices.method_params is not None  # Validated by the study, handed on.
    manifest_seen.append(studies.read_manifest(out_root) is not None)
    calls.append((config.method.name, config.seed, config.noise.rate, out))
    accuracy = 0.5 + 0.1 * config.seed + (0.05 if config.method.name == 'fedln' else 0.0)
    ran = config_lib.resolve_client_runtime(config)  # What a run records: auto resolved.
    results = results_lib.Results(
        config=ran.to_dict(), data_hash=config.data_hash(), method=config.method.name,
        params=dataclasses.asdict(choices.method_params),  # As a run records them.
        rounds=[{'round': r, 'test_accuracy': accuracy} for r in (1, 2, 3)],
        client_noise_rates={})
    results_lib.write(out, results)
    return results
  return run


def test_a_grid_writes_its_manifest_first_then_its_tables(tmp_path, capsys):
  path = tmp_path / 'c.yaml'
  path.write_text(json.dumps(_CONFIG))
  calls, seen = [], []
  out = tmp_path / 'grid'
  out.mkdir()
  settings = [studies.Setting.parse('noise.rate=0.2'), studies.Setting.parse('')]
  table = studies.grid(str(path), [], ['fedavg', 'fedln'], settings, [0, 1], str(out),
                       _recording_run(calls, str(out), seen))
  assert all(seen) and len(calls) == 8
  progress = capsys.readouterr().err.splitlines()  # Where a long grid is, cell by cell.
  assert progress[0] == '[grid] cell 1 of 8: noise.rate-0.2/seed0/fedavg'
  assert progress[-1] == '[grid] cell 8 of 8: default/seed1/fedln'
  # Each method keeps the params it takes (fedln's k); settings and seeds reach the config.
  assert calls[0][:3] == ('fedavg', 0, 0.2) and calls[-1][:3] == ('fedln', 1, 0.0)
  manifest = studies.read_manifest(str(out))
  assert manifest['kind'] == 'grid' and manifest['seeds'] == [0, 1]
  assert manifest['settings'] == {'noise.rate-0.2': 'noise.rate=0.2', 'default': ''}
  assert manifest['runs'][1] == {'path': 'noise.rate-0.2/seed0/fedln', 'method': 'fedln',
                                 'setting': 'noise.rate-0.2', 'seed': 0}
  with open(out / 'grid.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  assert [(r['setting'], r['method']) for r in rows][:2] == [('noise.rate=0.2', 'fedavg'),
                                                             ('noise.rate=0.2', 'fedln')]
  assert float(rows[1]['final_mean']) == pytest.approx(0.6)
  assert '| (config) | 55.00 ± 5.00 / 55.00 ± 5.00 | 60.00 ± 5.00 / 60.00 ± 5.00 |' in table
  text = open(report.write_report(str(out))[0]).read()
  assert 'A `tff-noisy grid`: 2 settings x 2 seeds (0, 1) x 2 methods' in text
  assert '| noise.rate-0.2 | `noise.rate=0.2` |' in text


def test_a_compare_validates_every_method_before_its_first_run(tmp_path):
  config = config_lib.from_dict(_CONFIG)
  calls = []
  with pytest.raises(config_lib.ConfigError, match="method.name: unknown method 'fedavgg'"):
    studies.compare(config, ['fedavg', 'fedavgg'], str(tmp_path),
                    _recording_run(calls, str(tmp_path), []))
  assert not calls and studies.read_manifest(str(tmp_path)) is None
  done = studies.compare(config, ['fedavg', 'fedln'], str(tmp_path),
                         _recording_run(calls, str(tmp_path), []))
  assert [name for name, _ in done] == ['fedavg', 'fedln']
  assert (tmp_path / 'comparison.csv').read_text().splitlines()[0] == (
      'method,final_accuracy,last10_accuracy')
  assert studies.read_manifest(str(tmp_path))['runs'][1]['path'] == 'fedln'


def test_a_resumed_grid_keeps_the_runs_finished_with_the_same_config(tmp_path, capsys):
  """``--resume``: a run with a results file of the same config is not started again (a
  method's set-up, such as Confident Learning's cross-validation, is not redone); one
  without, or of another config, runs."""
  path = tmp_path / 'c.yaml'
  path.write_text(json.dumps(_CONFIG))
  out = tmp_path / 'grid'
  out.mkdir()

  def grid(calls, keep_finished, rounds=3):
    return studies.grid(str(path), [f'fl.rounds={rounds}'], ['fedavg', 'fedln'], [], [0, 1],
                        str(out), _recording_run(calls, str(out), []),
                        keep_finished=keep_finished)
  first = []
  table = grid(first, keep_finished=True)  # Nothing finished yet: every run starts.
  assert len(first) == 4
  (out / 'default/seed1/fedln/results.json').unlink()  # Interrupted before its end.
  capsys.readouterr()
  again = []
  assert grid(again, keep_finished=True) == table  # The kept runs' scores, from file.
  assert [(name, seed) for name, seed, _, _ in again] == [('fedln', 1)]
  assert capsys.readouterr().err.splitlines() == [
      '[grid] 3 of 4 cells finished earlier with the same config: kept; 1 to run',
      '[grid] cell 1 of 1: default/seed1/fedln']
  assert json.loads((out / 'default/seed0/fedavg/results.json').read_text())['config'][
      'fl']['client_runtime'] == 'tf'  # The planned config says auto.
  ran_before = out / 'default/seed0/fedln/results.json'  # Under another default of fedln's.
  record = json.loads(ran_before.read_text())
  record['params']['k'] += 1
  ran_before.write_text(json.dumps(record))
  changed = []
  grid(changed, keep_finished=True)
  assert [(name, seed) for name, seed, _, _ in changed] == [('fedln', 0)]
  on_workers = []  # Where auto means tff, the cells that ran on tf are not the same.
  studies.grid(str(path), ['fl.rounds=3'], ['fedavg', 'fedln'], [], [0, 1], str(out),
               _recording_run(on_workers, str(out), []), keep_finished=True, on_workers=True)
  assert len(on_workers) == 4
  longer = []  # Another config (more rounds): every run goes on.
  grid(longer, keep_finished=True, rounds=4)
  assert len(longer) == 4
  overwritten = []  # Without --resume (--overwrite): every run starts again.
  grid(overwritten, keep_finished=False, rounds=4)
  assert len(overwritten) == 4


@pytest.mark.parametrize('setting', ['data.data_dir=../../../escaped', 'data.data_dir=/tmp/x',
                                     'data.data_dir=..', 'data.data_dir=a\\..\\..\\b'])
def test_a_grid_cell_stays_inside_out(tmp_path, setting):
  name = studies.setting_dir(setting)
  assert '/' not in name and '\\' not in name and '..' not in name
  config_path = tmp_path / 'c.yaml'
  config_path.write_text(json.dumps(_CONFIG))
  out = tmp_path / 'deep' / 'out'
  calls, seen = [], []
  studies.grid(str(config_path), [], ['fedln'], [studies.Setting.parse(setting)], [0],
               str(out), _recording_run(calls, str(out), seen))
  assert calls and all(str(run_out).startswith(str(out) + '/') for *_, run_out in calls)
  assert sorted(p.name for p in tmp_path.iterdir()) == ['c.yaml', 'deep']


def test_a_compare_creates_its_output_directory(tmp_path):
  out = tmp_path / 'not' / 'yet'
  calls, seen = [], []
  done = studies.compare(config_lib.from_dict(_CONFIG), ['fedavg'], str(out),
                         _recording_run(calls, str(out), seen))
  assert [name for name, _ in done] == ['fedavg'] and (out / 'comparison.csv').exists()


def test_a_grid_row_runs_the_method_its_overrides_name_in_its_own_directory(tmp_path,
                                                                           capsys):
  """A name that is not a method's is a row: ``method.name`` in its overrides is the method
  it runs, in OUT/SETTING/seedN/ROW, recorded in the manifest; ``--resume`` keeps it."""
  path = tmp_path / 'c.yaml'
  path.write_text(json.dumps(_CONFIG))
  out = tmp_path / 'grid'
  out.mkdir()
  rows = {'median': ['method.name=fedavg', 'fl.aggregator=coordinate_median']}

  def grid(calls):
    return studies.grid(str(path), [], ['fedavg', 'median'], [], [0], str(out),
                        _recording_run(calls, str(out), []), method_overrides=rows,
                        keep_finished=True)
  calls = []
  table = grid(calls)
  assert [(name, out_dir.rsplit('/', 2)[-2:]) for name, _, _, out_dir in calls] == [
      ('fedavg', ['seed0', 'fedavg']), ('fedavg', ['seed0', 'median'])]
  ran = json.loads((out / 'default/seed0/median/results.json').read_text())['config']
  assert (ran['method'], ran['fl']['aggregator']) == (
      {'name': 'fedavg', 'params': {}}, 'coordinate_median')  # fedln's k left out.
  assert studies.read_manifest(str(out))['runs'][1] == {
      'path': 'default/seed0/median', 'method': 'fedavg', 'setting': 'default', 'seed': 0,
      'row': 'median'}
  assert table.splitlines()[0] == '| setting | fedavg | median |'
  capsys.readouterr()
  again = []
  assert grid(again) == table and not again
  assert '[grid] 2 of 2 cells finished earlier with the same config' in capsys.readouterr().err
  with pytest.raises(config_lib.ConfigError, match="method.name: unknown method 'median'"):
    studies.grid(str(path), [], ['median'], [], [0], str(out), _recording_run([], '', []))


def test_a_parameter_added_since_a_run_keeps_it_finished_at_the_value_its_absence_means(
    tmp_path):
  """Ditto's ``test_fraction`` came with its paper reading: a FedDitto run recorded before
  it is kept on ``--resume``; one recorded with another value, or this run asking for
  another, is not the same run."""
  config = config_lib.from_dict(dict(_CONFIG, method={'name': 'ditto'}))
  run_dir = tmp_path / 'run'
  _recording_run([], str(tmp_path), [])(config, str(run_dir),
                                        validation.validate_experiment(config))
  record = json.loads((run_dir / 'results.json').read_text())
  assert record['params']['test_fraction'] == pytest.approx(1 / 7)
  del record['params']['test_fraction']  # As a run before the field recorded it.
  (run_dir / 'results.json').write_text(json.dumps(record))
  assert studies.finished_results(str(run_dir), config) is not None
  other = config_lib.from_dict(dict(_CONFIG, method={'name': 'ditto',
                                                      'params': {'test_fraction': 0.2}}))
  assert studies.finished_results(str(run_dir), other) is None
  record['params']['test_fraction'] = 0.2
  (run_dir / 'results.json').write_text(json.dumps(record))
  assert studies.finished_results(str(run_dir), config) is None
