"""`tff-noisy report DIR` on fake run, compare and grid directories (no TensorFlow).

The runs are written with ``tff_noisy.simulation.results.write`` (NumPy only), so they have
the real results.json and metrics.csv format; the tests check report.md against numbers
computed here from those files, and that the figures are non-empty PNGs.
"""
import csv
import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy import errors
from tff_noisy import methods
from tff_noisy import reporting
from tff_noisy.report import command as report
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import run_dir
from tff_noisy.simulation import studies
from experiments import run as cli

_ROOT = os.path.join(os.path.dirname(__file__), '..')
_RATES = {'client_000': 0.0, 'client_001': 0.1, 'client_002': 0.4, 'client_003': 0.6}
_SIZES = {'client_000': 100, 'client_001': 80, 'client_002': 120, 'client_003': 60}
_PNG = b'\x89PNG\r\n\x1a\n'
_PDF = b'%PDF-'


def _config(seed=0, rho=0.5):
  return {'seed': seed, 'data': {'dataset': 'digits', 'train_subset': None},
          'partition': {'name': 'iid', 'num_clients': 4},
          'noise': {'name': 'fedcorr', 'rho': rho, 'tau': 0.3}, 'model': {'name': 'mlp'},
          'method': {'name': 'fedavg', 'params': {}},
          'fl': {'rounds': 12, 'clients_per_round': 2, 'local_epochs': 1, 'batch_size': 16,
                 'client_optimizer': 'sgd', 'client_lr': 0.05, 'momentum': 0.9,
                 'server_lr': 1.0, 'weight_decay': 0.0, 'aggregator': 'mean'}}


def _rounds(accuracies, weights=None):
  """Round records as the driver writes them; every client takes part."""
  records = []
  for i, accuracy in enumerate(accuracies):
    clients = list(_RATES)
    records.append({
        'round': i + 1, 'clients': clients, 'skipped_empty_clients': 0,
        'client_weights': [float(weights[c] if weights else _SIZES[c]) for c in clients],
        'train_loss': 1.0, 'train_accuracy': 0.5, 'train_client_mean_accuracy': 0.5,
        'non_finite_clients': 0, 'update_rejected': 0, 'aggregator': {},
        'seconds': 0.1, 'wall_time': 1.0, 'test_accuracy': accuracy,
        'test_macro_f1': accuracy})
  return records


def _write(path, method, accuracies, seed=0, rho=0.5, extra=None, params=None,
           weights=None, per_round=None, data_hash='d0'):
  rounds = _rounds(accuracies, weights)
  for round_num, fields in (per_round or {}).items():
    rounds[round_num - 1].update(fields)
  config = _config(seed, rho)
  config['method'] = {'name': method, 'params': params or {}}
  results_lib.write(str(path), results_lib.Results(
      config=config, data_hash=data_hash, method=method, params=params or {},
      rounds=rounds, client_noise_rates=dict(_RATES), extra=extra or {},
      client_sizes=dict(_SIZES)))
  return json.loads((path / results_lib.RESULTS_FILE).read_text())


def _accuracies(seed, shift):
  rng = np.random.default_rng([seed, int(round(100 * shift)) + 50])
  return [float(a) for a in np.round(np.linspace(0.3, 0.8, 12) + shift
                                     + rng.uniform(-0.02, 0.02, 12), 4)]


def _pct(values):
  return f'{100 * np.mean(values):.2f} ± {100 * np.std(values):.2f}'


def _assert_png(path):
  """A PNG at print resolution, with the same figure as a PDF beside it."""
  assert os.path.getsize(path) > 2000, path
  with open(path, 'rb') as f:
    head = f.read(24)
  assert head[:8] == _PNG
  assert int.from_bytes(head[16:20], 'big') >= 900, path  # Width in pixels, at 300 dpi.
  vector = str(path)[:-len('.png')] + '.pdf'
  assert os.path.getsize(vector) > 1000, vector
  with open(vector, 'rb') as f:
    assert f.read(5) == _PDF


def _figures(text):
  return [line[line.index('](') + 2:-1] for line in text.splitlines()
          if line.startswith('![')]


_NOISE_ESTIMATES = {'client_000': 0.05, 'client_001': 0.2, 'client_002': 0.35,
                    'client_003': 0.7}
_CORRECTION = {'overall': {'num_examples': 360, 'fraction_changed': 0.25, 'precision': 0.8,
                           'noise_before': 0.3, 'noise_after': 0.12, 'fixed': 0.6,
                           'corrupted': float('nan')},
               'per_client': {c: {'num_examples': n, 'fraction_changed': 0.2,
                                  'precision': 0.8, 'noise_before': _RATES[c],
                                  'noise_after': _RATES[c] / 2, 'fixed': 0.5,
                                  'corrupted': 0.0} for c, n in _SIZES.items()}}


def test_report_of_a_run_with_noise_estimates_and_label_correction(tmp_path, capsys):
  run = tmp_path / 'fedln'
  weights = {c: _SIZES[c] * (1 - _NOISE_ESTIMATES[c]) for c in _RATES}
  saved = _write(run, 'fedln', _accuracies(0, 0.0), extra={
      'nnc_encoder': 'pca-abc', 'label_correction': _CORRECTION}, weights=weights,
                 per_round={3: {'noise_threshold': 4.5, 'noise_estimates': _NOISE_ESTIMATES,
                                'noise_estimate_correlation': 0.97}},
                 params={'k': 10, 'nu': 75.0})
  cli.main(['report', str(run)])
  assert 'wrote ' in capsys.readouterr().out
  text = (run / 'report.md').read_text()
  assert text.startswith('# Report: fedln\n') and str(tmp_path) not in text  # No machine path.
  assert 'Directory:' not in text
  assert f"Final test accuracy {100 * saved['final_accuracy']:.2f}%" in text
  assert f"last 10 evaluated rounds {100 * saved['last10_accuracy']:.2f}%" in text
  accuracies = [r['test_accuracy'] for r in saved['rounds']]
  best = int(np.argmax(accuracies))
  fall = 100 * (accuracies[best] - accuracies[-1])
  assert (f'Best {100 * accuracies[best]:.2f}% at round {best + 1}; it falls {fall:.1f} '
          "points from there to the last round (not in the papers' regime") in text
  # The noise estimates against the truth: the Pearson r, and the run's own value.
  r = np.corrcoef([_RATES[c] for c in _RATES], [_NOISE_ESTIMATES[c] for c in _RATES])[0, 1]
  assert '### fedln: noise estimate' in text and 'Noise estimate: round 3.' in text
  assert f'| seed 0 | 4 | {r:.3f} | 0.970 |' in text
  # Weights of (1 - estimate) x size are not example counts: reported against the truth.
  assert '### fedln: relative aggregation weight' in text
  assert '| label correction' not in text
  assert '| fedln | seed 0 | 360 | 0.250 | 0.800 | 0.300 | 0.120 | 0.600 | n/a |' in text
  assert 'k=10, nu=75.0' in text and '| fedln | `noise_threshold` | nnc_encoder pca-abc |' in text
  # Sizes as recorded (client_sizes); the truth summary.
  assert '| 0 | `d0` | 4 | 3 of 4 | 0.275 | 0.000 / 0.250 / 0.600 | 60 / 90 / 120 ' in text
  for absent in ('## Prestopping', '## LSC', '## Noisy-client detection', '## Runs',
                 'lock file'):
    assert absent not in text
  figures = _figures(text)
  assert figures == ['report-accuracy.png', 'report-fedln-noise_estimates.png',
                     'report-fedln-weights.png', 'report-fedln-label-correction.png']
  for name in figures:
    _assert_png(run / name)


def test_report_of_a_compare(tmp_path):
  out = tmp_path / 'cmp'
  reliabilities = {'client_000': 0.95, 'client_001': 0.9, 'client_002': 0.6,
                   'client_003': 0.5}
  shares = {c: v / sum(reliabilities.values()) for c, v in reliabilities.items()}
  runs = {
      'fedavg': _write(out / 'fedavg', 'fedavg', _accuracies(0, 0.0)),
      'fedds': _write(out / 'fedds', 'fedds', _accuracies(0, 0.05), per_round={
          r: {'reliabilities': reliabilities, 'fedds_weights': shares,
              'reliability_correlation': 0.9} for r in range(2, 13)},
                      extra={'fedds_public_size': 145}),
  }
  with open(out / 'comparison.csv', 'w', newline='') as f:
    csv.writer(f).writerows([['method', 'final_accuracy', 'last10_accuracy']] + [
        [m, r['final_accuracy'], r['last10_accuracy']] for m, r in runs.items()])
  path, figures = report.write_report(str(out))
  text = open(path).read()
  assert 'A `tff-noisy compare` of 2 methods (fedavg, fedds) on the same data.' in text
  for method, saved in runs.items():
    assert (f"| {method} | 0 | {100 * saved['final_accuracy']:.2f} | "
            f"{100 * saved['last10_accuracy']:.2f} |") in text
  rates = [_RATES[c] for c in _RATES]
  r = np.corrcoef(rates, [reliabilities[c] for c in _RATES])[0, 1]
  assert '### fedds: reliability' in text and 'mean over the 11 rounds' in text
  assert f'| seed 0 | 4 | {r:.3f} | 0.900 |' in text
  assert f'| seed 0 | 4 | {r:.3f} |\n' in text  # The weights are proportional to them.
  # The recorded client sizes; plain FedAvg has no estimates.
  assert '60 / 90 / 120 (4 clients, 360 examples)' in text
  assert '### fedavg' not in text
  for absent in ('## Label correction', '## Prestopping', '## LSC'):
    assert absent not in text
  # The runs' files are named, not linked: the report's only links are its own figures.
  assert '| fedds | 0 | finished | `fedds/results.json` |' in text
  assert '](fedds/results.json)' not in text
  assert sorted(re.findall(r'\]\(([^)]*)\)', text)) == sorted(figures)
  assert figures == _figures(text)
  for name in figures:
    _assert_png(out / name)


def _write_grid(out):
  """2 settings x 2 seeds x (fedavg, forward_correction or lsc); one run unfinished."""
  settings = {'noise.rho=0.5': 'noise.rho-0.5', 'noise.rho=1.0': 'noise.rho-1.0'}
  saved = {}
  for s, (setting, name) in enumerate(settings.items()):
    rho = float(setting.split('=')[1])
    for seed in (0, 1):
      base = out / name / f'seed{seed}'
      saved[(name, seed, 'fedavg')] = _write(base / 'fedavg', 'fedavg',
                                             _accuracies(seed, -0.1 * s), seed, rho,
                                             data_hash=f'd{s}{seed}')
      if (name, seed) == ('noise.rho-1.0', 1):
        (base / 'forward_correction' / 'checkpoints' / 'round_00010').mkdir(parents=True)
        continue
      switch = 5 + seed
      per_round = {r: {'prestop': {'corrected': int(r > switch), 'signal': 0.4 + 0.01 * r,
                                   'signal_kind': 'global', 'best': 0.5, 'count': 0,
                                   'switch_round': switch if r >= switch else None}}
                   for r in range(1, 13)}
      per_round[switch + 1]['transition_matrix_error'] = {
          'anchor': {'per_client': {'client_000': {'l1': 0.4, 'cosine': 0.9}},
                     'mean_l1': 0.4 + seed, 'mean_cosine': 0.9}}
      saved[(name, seed, 'forward_correction')] = _write(
          base / 'forward_correction', 'forward_correction',
          _accuracies(seed, 0.05 - 0.1 * s), seed, rho, per_round=per_round,
          extra={'lsc': {'neighbour_purity': 0.7, 'same_label_chance': 0.1, 'k': 4,
                         'encoder': 'pca-1'}} if seed == 0 else None,
          data_hash=f'd{s}{seed}')
  with open(out / 'grid.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['setting', 'method', 'seeds', 'final_mean', 'final_std', 'last10_mean',
                     'last10_std'])
    writer.writerows([s, m, 2, 0, 0, 0, 0] for s in settings
                     for m in ('fedavg', 'forward_correction'))
  return saved


def test_a_grid_reports_setup_describes_what_every_run_ran(tmp_path):
  """Not the first run's config: a field that differs is given per method or setting."""
  out = tmp_path / 'grid'
  settings = {'clean': 'none', 'noisy': 'fedcorr'}
  for setting, noise in settings.items():
    for seed in (0, 1):
      for method, aggregator in (('fedavg', 'mean'),
                                 ('maskedoptim', 'geometric_median_per_tensor')):
        config = _config(seed)
        config['noise']['name'] = noise
        config['fl']['aggregator'] = aggregator
        config['method'] = {'name': method, 'params': {}}
        results_lib.write(str(out / setting / f'seed{seed}' / method), results_lib.Results(
            config=config, data_hash=f'{setting}{seed}', method=method, params={},
            rounds=_rounds(_accuracies(seed, 0.0)), client_noise_rates=dict(_RATES),
            extra={}, client_sizes=dict(_SIZES)))
  with open(out / 'grid.csv', 'w', newline='') as f:
    csv.writer(f).writerows([['setting', 'method', 'seeds', 'final_mean', 'final_std',
                              'last10_mean', 'last10_std']] +
                            [[s, m, 2, 0, 0, 0, 0] for s in settings
                             for m in ('fedavg', 'maskedoptim')])
  text = open(report.write_report(str(out))[0]).read()
  assert '- Noise model, by setting: clean: none; noisy: fedcorr.' in text
  assert ('- Aggregator, by method: fedavg: mean; maskedoptim: '
          'geometric_median_per_tensor.') in text
  assert '- Model: mlp.' in text and '- Partition: iid, 4 clients.' in text
  assert 'aggregator mean' not in text  # The first run's aggregator is not everyone's.


def test_report_of_a_grid_with_an_unfinished_run(tmp_path):
  out = tmp_path / 'grid'
  saved = _write_grid(out)
  path, figures = report.write_report(str(out))
  text = open(path).read()
  assert 'A `tff-noisy grid`: 2 settings x 2 seeds (0, 1) x 2 methods' in text
  assert '7 of 8 runs finished.' in text
  assert ('| noise.rho-1.0 | forward_correction | 1 | unfinished (no results.json), '
          'checkpointed through round 10 |') in text
  # Mean +- std over the seeds, of the numbers in results.json; one seed: no std.
  for name in ('noise.rho-0.5', 'noise.rho-1.0'):
    for method in ('fedavg', 'forward_correction'):
      runs = [saved[k] for k in sorted(saved) if k[0] == name and k[2] == method]
      if len(runs) == 2:
        cells = (_pct([r['final_accuracy'] for r in runs]),
                 _pct([r['last10_accuracy'] for r in runs]))
        seeds = '0, 1'
      else:
        cells = (f"{100 * runs[0]['final_accuracy']:.2f}",
                 f"{100 * runs[0]['last10_accuracy']:.2f}")
        seeds = '0'
      assert f'| {name} | {method} | {seeds} | {cells[0]} | {cells[1]} |' in text
  # Settings named by grid.csv; the config fields that differ.
  assert ('Test accuracy (%) per round, mean over seeds, one panel per setting (the '
          "settings' overrides: Setup). Band: ± one std over seeds") in text
  assert ("Dotted lines: forward_correction's prestopping switch (noise.rho-0.5: rounds 5, "
          "6); forward_correction's prestopping switch (noise.rho-1.0: round 5).") in text
  assert '| noise.rho-1.0 | `noise.rho=1.0` |' in text
  assert '`noise.rho`, `seed`' in text
  # Prestopping: each run's switch round and its matrix error.
  assert '| noise.rho-0.5 | forward_correction | seed 1 | 6 | anchor (round 7) | 1.400 |' in text
  assert '| noise.rho-1.0 | forward_correction | seed 0 | 5 | anchor (round 6) | 0.400 |' in text
  assert '## LSC neighbour purity' in text and '| 0.700 | 0.100 | 4 |' in text
  for absent in ('## Per-client estimates', '## Label correction', '**Warning:**'):
    assert absent not in text
  assert figures == _figures(text)
  assert set(figures) == {  # One accuracy figure, a panel per setting.
      'report-accuracy.png', 'report-noise.rho-0.5-forward_correction-prestop.png',
      'report-noise.rho-1.0-forward_correction-prestop.png'}
  for name in figures:
    _assert_png(out / name)


def test_report_names_a_running_grids_missing_runs(tmp_path):
  """The manifest a grid writes before its first run names the runs not begun."""
  out = tmp_path / 'grid'
  _write(out / 'default' / 'seed0' / 'fedavg', 'fedavg', _accuracies(0, 0.0))
  config = config_lib.from_dict({'data': {'dataset': 'digits'}})
  studies.write_manifest(str(out), 'grid', [
      studies.PlannedRun(os.path.join('default', f'seed{seed}', method), method, config,
                         None, 'default', seed)
      for seed in (0, 1) for method in ('fedavg', 'fedln')], ['fedavg', 'fedln'], [0, 1],
      {'default': ''})
  (out / '.tff-noisy.lock').write_text(json.dumps({
      'pid': os.getpid(), 'host': socket.gethostname(), 'started': 'now',
      'command': 'tff-noisy grid c.yaml --methods fedavg,fedln --seeds 0,1 --out grid'}))
  text = open(report.write_report(str(out))[0]).read()
  assert '**Running** (lock file: PID' in text
  assert '1 setting x 2 seeds (0, 1) x 2 methods (fedavg, fedln)' in text
  assert '1 of 4 runs finished.' in text
  assert text.count('| not started |') == 3
  assert '| default | fedln | 1 | not started |' in text


def test_publish_copies_the_finished_runs_results_and_reports_them_alone(tmp_path, capsys):
  """``report DIR --publish DEST``: DEST holds the manifest, grid.csv and each finished
  run's results.json only, and published.json listing them; its report equals the grid's
  but for the unfinished run, which it calls not started; a second publish replaces the
  first. A DEST holding files no publish wrote is refused, naming them, nothing removed."""
  out, dest = tmp_path / 'grid', tmp_path / 'docs' / 'published'
  saved = _write_grid(out)
  planned = [studies.PlannedRun(os.path.join(name, f'seed{seed}', method), method,
                                config_lib.from_dict({'data': {'dataset': 'digits'}}),
                                None, name, seed)
             for (name, seed, method) in sorted(saved) + [('noise.rho-1.0', 1,
                                                           'forward_correction')]]
  studies.write_manifest(str(out), 'grid', planned, ['fedavg', 'forward_correction'],
                         [0, 1], {'noise.rho-0.5': 'noise.rho=0.5',
                                  'noise.rho-1.0': 'noise.rho=1.0'})
  mine = {'old_setting/seed0/fedavg/results.json': b'{}', 'report-mine.png': _PNG,
          'report.md': b'mine', 'grid.csv': b'mine', 'notes.md': b'mine'}
  for name, content in mine.items():  # A folder of the user's, no publish's.
    (dest / name).parent.mkdir(parents=True, exist_ok=True)
    (dest / name).write_bytes(content)
  with pytest.raises(SystemExit):
    cli.main(['report', str(out), '--publish', str(dest)])
  assert capsys.readouterr().err.splitlines()[-1] == (
      f'tff-noisy: error: --publish: {dest} holds files no earlier --publish wrote there '
      '(grid.csv, notes.md, old_setting/seed0/fedavg/results.json, report-mine.png, '
      'report.md); move them away or choose another DEST (--publish replaces only the '
      'files its published.json lists)')
  assert {name: (dest / name).read_bytes() for name in mine} == mine
  shutil.rmtree(dest)
  cli.main(['report', str(out), '--publish', str(dest)])
  assert capsys.readouterr().out.splitlines()[-1] == (
      f"published 7 finished run(s) of 8 and their report: {dest / 'report.md'}")
  copied = sorted(os.path.relpath(os.path.join(root, name), dest)
                  for root, _, names in os.walk(dest) for name in names)
  figures = _figures(open(dest / 'report.md').read())
  vectors = [name[:-len('.png')] + '.pdf' for name in figures]
  written = sorted(['grid.csv', 'manifest.json', 'report.md'] + figures + vectors + [
      os.path.join(name, f'seed{seed}', method, 'results.json')
      for name, seed, method in saved])
  assert copied == sorted(written + ['published.json'])
  assert json.loads((dest / 'published.json').read_text()) == {'files': written}
  for (name, seed, method), results in saved.items():
    assert json.loads((dest / name / f'seed{seed}' / method / 'results.json').read_text()
                      ) == results
  text, grid_text = open(dest / 'report.md').read(), open(out / 'report.md').read()
  assert '| noise.rho-1.0 | forward_correction | 1 | not started |' in text
  assert 'checkpointed' not in text and 'checkpointed through round 10' in grid_text
  table = lambda t: t[t.index('## Test accuracy'):t.index('## Setup')]
  assert table(text) == table(grid_text)
  # Published again after the last run finished: it joins, nothing else changes.
  (out / 'noise.rho-1.0' / 'seed1' / 'forward_correction' / 'checkpoints').rename(
      tmp_path / 'moved')
  _write(out / 'noise.rho-1.0' / 'seed1' / 'forward_correction', 'forward_correction',
         _accuracies(1, -0.05), 1, 1.0)
  with run_dir.claim(str(out), resume=True):  # Published while the grid still runs.
    cli.main(['report', str(out), '--publish', str(dest)])
  assert capsys.readouterr().out.splitlines() == [
      f'{out} is still being written: its own report waits until it ends; its finished '
      'runs are published',
      f"published 8 finished run(s) of 8 and their report: {dest / 'report.md'}"]
  assert (dest / 'noise.rho-1.0' / 'seed1' / 'forward_correction' / 'results.json').exists()
  text = open(dest / 'report.md').read()
  assert 'not started' not in text and '7 of 8' not in text
  assert len(json.loads((dest / 'published.json').read_text())['files']) == len(written) + 1
  (dest / 'noise.rho-1.0' / 'seed1' / 'notes.md').write_text('mine')  # Added by the user.
  with pytest.raises(report.ReportError, match=r'holds files no earlier --publish wrote '
                                               r'there \(noise.rho-1.0/seed1/notes.md\)'):
    report.publish(str(out), str(dest))
  assert (dest / 'report.md').read_text() == text
  with pytest.raises(report.ReportError, match='must be outside'):
    report.publish(str(out), str(out / 'published'))
  other = tmp_path / 'other_grid'  # A study's own directory is not a place to publish to.
  (other / 'default' / 'seed0' / 'fedavg' / 'checkpoints').mkdir(parents=True)
  _write(other / 'default' / 'seed0' / 'fedavg', 'fedavg', _accuracies(0, 0.0))
  with pytest.raises(report.ReportError, match=r'no earlier --publish wrote there '
                                               r'\(default/seed0/fedavg/metrics.csv, '):
    report.publish(str(out), str(other))
  assert (other / 'default' / 'seed0' / 'fedavg' / 'results.json').exists()


def test_publish_on_a_full_disk_leaves_no_part_written_file(tmp_path, monkeypatch, capsys):
  """Every file ``--publish`` writes is whole or not there: a full disk is one line and a
  publish after it, with room again, writes DEST whole."""
  out, dest = tmp_path / 'grid', tmp_path / 'published'
  _write_grid(out)

  def full(fd):
    raise OSError(errno.ENOSPC, 'No space left on device')
  with monkeypatch.context() as patch:
    patch.setattr(os, 'fsync', full)
    with pytest.raises(SystemExit):
      cli.main(['report', str(out), '--publish', str(dest)])
    (line,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(f'tff-noisy: error: cannot write {re.escape(str(out))}/report-\\S+'
                        r'\.png: No space left on device: the disk is full', line), line
    assert not [name for name in os.listdir(out) if name.startswith(('report', '.report'))]
    with pytest.raises(errors.OutputError, match='disk is full'):
      report.publish(str(out), str(dest))
  assert [name for _, _, names in os.walk(dest) for name in names] == []
  report.publish(str(out), str(dest))
  assert (dest / 'grid.csv').read_bytes() == (out / 'grid.csv').read_bytes()


def test_methods_are_reported_in_the_order_the_study_gave_them(tmp_path):
  out = tmp_path / 'grid'
  names = ['fedprox', 'fedavg', 'fedds']
  for method in names + ['coteaching']:  # coteaching: not in the manifest; last.
    _write(out / 'default' / 'seed0' / method, method, _accuracies(0, 0.0))
  config = config_lib.from_dict({'data': {'dataset': 'digits'}})
  studies.write_manifest(str(out), 'grid', [
      studies.PlannedRun(os.path.join('default', 'seed0', m), m, config, None, 'default', 0)
      for m in names], names, [0], {'default': ''})
  text = open(report.write_report(str(out))[0]).read()
  section = text[text.index('## Test accuracy'):text.index('## Fit to the clients')]
  rows = [line.split(' | ')[1] for line in section.splitlines()
          if line.startswith('| default |')]
  assert rows == ['fedprox', 'fedavg', 'fedds', 'coteaching']


def test_an_unfinished_run_is_reported_as_such(tmp_path):
  run = tmp_path / 'run'
  (run / 'tb').mkdir(parents=True)
  (run / 'checkpoints' / 'round_00020').mkdir(parents=True)
  gone = subprocess.Popen(['true'])
  gone.wait()
  (run / '.tff-noisy.lock').write_text(json.dumps({
      'pid': gone.pid, 'host': socket.gethostname(), 'started': 'then',
      'command': 'tff-noisy run c.yaml --out run'}))
  path, figures = report.write_report(str(run))
  text = open(path).read()
  assert '**This run is not finished** (no `results.json`).' in text
  assert f'**Interrupted** (lock file: PID {gone.pid} on' in text
  assert 'checkpointed through round 20' in text
  assert figures == [] and '## Test accuracy' not in text


@pytest.mark.parametrize('make', [
    lambda d: None,
    lambda d: (d / 'notes.txt').write_text('x'),
    lambda d: (d / 'a' / 'b').mkdir(parents=True),
])
def test_an_unknown_layout_is_one_error_naming_the_layouts(tmp_path, capsys, make):
  make(tmp_path)
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['report', str(tmp_path)])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and 'Traceback' not in err
  assert err.startswith(f'tff-noisy: error: {tmp_path} is not a tff-noisy output '
                        'directory: expected a run (results.json), a compare directory '
                        '(METHOD/results.json and comparison.csv) or a grid directory '
                        '(SETTING/seedN/METHOD/results.json and grid.csv)')
  assert not (tmp_path / 'report.md').exists()


def test_runs_that_are_not_a_compare_are_not_read_as_one(tmp_path):
  """A folder of unrelated runs (directory names are not their methods)."""
  _write(tmp_path / 'first_try', 'fedavg', _accuracies(0, 0.0))
  with pytest.raises(report.ReportError, match='is not a tff-noisy output directory'):
    report.write_report(str(tmp_path))


def test_the_command_loads_no_tensorflow(tmp_path):
  _write(tmp_path / 'run', 'fedavg', _accuracies(0, 0.0))
  child = ('import sys; from experiments import run; run.main(sys.argv[1:]); '
           "print('tensorflow' in sys.modules)")
  done = subprocess.run([sys.executable, '-c', child, 'report', str(tmp_path / 'run')],
                        capture_output=True, text=True, timeout=120, cwd=_ROOT, check=True)
  assert done.stdout.splitlines()[-1] == 'False'
  assert done.stdout.startswith(f"wrote {tmp_path / 'run' / 'report.md'} and 1 figure")


def test_detection_flags_and_their_truth(tmp_path):
  run = tmp_path / 'maskedoptim'
  truth = {'flagged': 2, 'truly_noisy': 3, 'precision': 1.0, 'recall': 2 / 3}
  records = {r: {'noisy_clients': ['client_002', 'client_003'], 'detection_truth': truth,
                 'label_estimate_accuracy': {'accuracy': 0.5, 'observed_accuracy': 0.4}}
             for r in range(6, 13)}
  _write(run, 'maskedoptim', _accuracies(0, 0.0), per_round=records)
  text = open(report.write_report(str(run))[0]).read()
  r = np.corrcoef([_RATES[c] for c in _RATES], [0, 0, 1, 1])[0, 1]
  assert '### maskedoptim: flagged as noisy (1) or not (0)' in text
  assert f'| seed 0 | 4 | {r:.3f} |' in text
  assert ('| maskedoptim | seed 0 | noisy-client detection vs the truth (round 12) | '
          'flagged 2, truly_noisy 3, precision 1.000, recall 0.667 |') in text
  assert 'accuracy 0.500, observed_accuracy 0.400' in text
  assert '## Label correction' not in text
  _assert_png(run / 'report-maskedoptim-noisy_clients.png')


def test_estimated_summary_scores_each_estimate_against_the_truth(tmp_path):
  """The lines `compare` prints under its table: one per thing a method estimated."""
  weights = {c: _SIZES[c] * (1 - _NOISE_ESTIMATES[c]) for c in _RATES}
  fedln = _write(tmp_path / 'fedln', 'fedln', _accuracies(0, 0.0),
                 extra={'label_correction': _CORRECTION}, weights=weights,
                 per_round={3: {'noise_estimates': _NOISE_ESTIMATES}})
  truth = [_RATES[c] for c in _RATES]
  r_estimates = np.corrcoef(truth, [_NOISE_ESTIMATES[c] for c in _RATES])[0, 1]
  relative = [weights[c] / np.mean(list(weights.values())) for c in _RATES]
  assert report.estimated_summary(fedln) == [
      f'noise estimate vs true noise rate: r = {r_estimates:+.2f} over 4 clients',
      f'relative aggregation weight vs true noise rate: r = '
      f'{np.corrcoef(truth, relative)[0, 1]:+.2f} over 4 clients',
      'label correction: wrong labels 30.0% -> 12.0%']
  errors = {'confident_joint': {'mean_l1': 5.2, 'mean_cosine': 0.875, 'per_client': {}}}
  fedefc = _write(tmp_path / 'fedefc', 'fedefc', _accuracies(0, 0.0), per_round={
      4: {'prestop': {'switch_round': None}}, 6: {'prestop': {'switch_round': 5}},
      7: {'transition_matrix_error': errors}})
  assert report.estimated_summary(fedefc) == [
      'switched to correction after round 5',
      'confident_joint transition matrices vs the true ones: mean cosine 0.875, mean L1 '
      '5.200']
  truth_record = {'flagged': 2, 'truly_noisy': 3, 'precision': 1.0, 'recall': 2 / 3}
  masked = _write(tmp_path / 'mo', 'maskedoptim', _accuracies(0, 0.0), per_round={
      12: {'noisy_clients': ['client_003'], 'detection_truth': truth_record,
           'label_estimate_accuracy': {'accuracy': 0.5, 'observed_accuracy': 0.4}}})
  assert report.estimated_summary(masked)[1:] == [
      'noisy-client detection: 2 flagged, 3 truly noisy; precision 1.000, recall 0.667',
      'labels on flagged clients: 40.0% right as observed, 50.0% as estimated']
  assert report.estimated_summary(_write(tmp_path / 'avg', 'fedavg',
                                         _accuracies(0, 0.0))) == []


def test_time_per_round_beside_fedavg_of_the_same_seed(tmp_path):
  """The median of each run's rounds after the first (round 1 traces), over seeds; the
  ratio pairs each seed with FedAvg's run of that seed."""
  out = tmp_path / 'cmp'
  _write(out / 'fedavg', 'fedavg', _accuracies(0, 0.0),
         per_round={r: {'seconds': 0.2} for r in range(2, 13)})
  _write(out / 'fedcorr', 'fedcorr', _accuracies(0, 0.05),
         per_round={1: {'seconds': 60.0}, **{r: {'seconds': 0.5} for r in range(2, 13)}})
  with open(out / 'comparison.csv', 'w', newline='') as f:
    csv.writer(f).writerows([['method', 'final_accuracy', 'last10_accuracy'],
                             ['fedavg', 0.5, 0.5], ['fedcorr', 0.5, 0.5]])
  text = open(report.write_report(str(out))[0]).read()
  assert '## Time per round' in text
  assert '| fedavg |  | 0.20 |  |' in text and '| fedcorr |  | 0.50 | 2.50 |' in text


def test_fit_to_the_clients_labels_beside_the_share_that_is_correct(tmp_path):
  """The last 10 trained rounds' training accuracy beside 1 - the example-weighted noise
  rate of the same rounds' clients; a round that trained nothing is not one of them."""
  out = tmp_path / 'cmp'
  two = ['client_000', 'client_002']  # 100 and 120 examples, rates 0.0 and 0.4.
  first = {1: {'train_accuracy': 0.1}, 2: {'train_accuracy': 0.1}}
  _write(out / 'fedavg', 'fedavg', _accuracies(0, 0.0), per_round={
      **first, **{r: {'clients': two, 'train_accuracy': 0.9} for r in range(3, 13)}})
  _write(out / 'lsc', 'lsc', _accuracies(0, 0.05), per_round={
      **first, **{r: {'clients': two, 'train_accuracy': 0.5} for r in range(3, 12)},
      12: {'train_accuracy': None}})
  with open(out / 'comparison.csv', 'w', newline='') as f:
    csv.writer(f).writerows([['method', 'final_accuracy', 'last10_accuracy'],
                             ['fedavg', 0.5, 0.5], ['lsc', 0.5, 0.5]])
  two_correct = (100 * 1.0 + 120 * 0.6) / 220
  all_correct = 1 - (80 * 0.1 + 120 * 0.4 + 60 * 0.6) / 360
  lsc_accuracy, lsc_share = (0.1 + 9 * 0.5) / 10, (all_correct + 9 * two_correct) / 10
  assert report.label_fit(json.loads((out / 'lsc' / 'results.json').read_text())) == (
      pytest.approx(lsc_accuracy), pytest.approx(lsc_share), 10)
  text = open(report.write_report(str(out))[0]).read()
  assert '## Fit to the clients\' labels' in text
  assert (f'| fedavg | 1 | 90.00 | {100 * two_correct:.2f} | '
          f'{100 * (0.9 - two_correct):+.2f} |') in text
  assert (f'| lsc | 1 | {100 * lsc_accuracy:.2f} | {100 * lsc_share:.2f} | '
          f'{100 * (lsc_accuracy - lsc_share):+.2f} |') in text
  assert report.label_fit({'rounds': _rounds([0.5]), 'client_noise_rates': _RATES}) is None


def _captured(monkeypatch, module):
  """The figures ``module.save`` is given, kept open instead of written."""
  figures = []
  monkeypatch.setattr(module, 'save', lambda fig, path: figures.append(fig))
  return figures


def test_figures_are_vector_too_and_the_same_bytes_each_time(tmp_path):
  out = tmp_path / 'grid'
  _write_grid(out)
  _, figures = report.write_report(str(out))
  vectors = {name: (out / name.replace('.png', '.pdf')).read_bytes() for name in figures}
  for name in figures:
    _assert_png(out / name)
    assert str(tmp_path).encode() not in vectors[name]  # Nor a machine's path.
  report.write_report(str(out))  # No date in them: a report written again is unchanged.
  assert {name: (out / name.replace('.png', '.pdf')).read_bytes()
          for name in figures} == vectors


def test_accuracy_bands_are_mean_and_std_over_seeds_in_percent_with_display_names(
    monkeypatch):
  """Not min to max: the band is the mean ± the population std of the seeds (as the
  tables), in %; methods by display name, told apart by marker and line style too."""
  seeds = [_accuracies(seed, 0.0) for seed in (0, 1, 2)]
  curves = {'fedavg': [list(enumerate(a, 1)) for a in seeds],
            'forward_correction': [list(enumerate(a, 1)) for a in seeds[:2]]}
  figures = _captured(monkeypatch, report)
  report.plot_accuracy({'(ρ, τ) = (0.5, 0.3)': curves, 'other': curves}, 'unused.png',
                       {'other': {'forward_correction': {'prestopping switch': [5, 6]}}})
  fig, = figures
  values = 100 * np.array(seeds)
  first = fig.axes[0]
  np.testing.assert_allclose(first.lines[0].get_ydata(), values.mean(axis=0))
  band = first.collections[0].get_paths()[0].vertices[:, 1]
  mean, std = values.mean(axis=0), values.std(axis=0)
  np.testing.assert_allclose(band.max(), (mean + std).max())
  np.testing.assert_allclose(band.min(), (mean - std).min())
  assert not np.isclose(band.max(), values.max())  # Not the seeds' maximum.
  assert [line.get_xdata()[0] for line in fig.axes[1].lines[2:]] == [5, 6]
  assert [t.get_text() for t in fig.legends[0].get_texts()] == [
      'FedAvg (3 seeds)', 'Forward correction (2 seeds)',
      'Forward correction: prestopping switch, one line per seed']
  fedavg, correction = first.lines[:2]
  assert fedavg.get_marker() != correction.get_marker()
  assert fedavg.get_linestyle() != correction.get_linestyle()
  assert fedavg.get_color() != correction.get_color()
  assert first.get_ylabel() == 'test accuracy (%)'
  assert first.get_title() == '(ρ, τ) = (0.5, 0.3)'


def test_every_method_has_its_own_display_name_from_the_registry():
  names = {name: methods.display_name(name) for name in methods.METHODS}
  assert names['fedavg'] == 'FedAvg' and names['fedefc'] == 'FedEFC'
  assert names['fedds_fedprox'] == 'FedProx + FedDS'
  assert all(names.values()) and len(set(names.values())) == len(names)
  assert methods.display_name('not_registered') == 'not_registered'


def test_scatter_points_are_jittered_with_a_fit_line(monkeypatch):
  """Clients with the same true rate stay visible; the fit is the least-squares line."""
  x, y = [0.2] * 5 + [0.6] * 5, [0.1, 0.15, 0.2, 0.1, 0.2, 0.5, 0.55, 0.6, 0.5, 0.6]
  figures = _captured(monkeypatch, reporting)
  reporting.plot_scatter({'seed 0': (x, y)}, 'true noise rate', 'estimate', 't', 'p.png',
                         diagonal=True)
  ax = figures[0].axes[0]
  shown = ax.collections[0].get_offsets()
  assert len(set(shown[:, 0])) == 10  # Ten distinct positions from two values.
  assert np.all(np.abs(shown[:, 0] - x) <= reporting.JITTER * 0.4 + 1e-12)
  slope, intercept = np.polyfit(x, y, 1)
  fit = ax.lines[0]
  np.testing.assert_allclose(fit.get_ydata(), intercept + slope * np.array([0.2, 0.6]))
  assert [t.get_text() for t in ax.get_legend().get_texts()] == [
      'seed 0', f'least-squares fit (slope {slope:.2f})', 'y = x']


def test_a_shorter_run_names_the_window_its_last_10_covers(tmp_path):
  out = tmp_path / 'cmp'
  for method in ('fedavg', 'lsc'):
    _write(out / method, method, _accuracies(0, 0.0)[:4])
  with open(out / 'comparison.csv', 'w', newline='') as f:
    csv.writer(f).writerows([['method', 'final_accuracy', 'last10_accuracy'],
                             ['fedavg', 0.5, 0.5], ['lsc', 0.5, 0.5]])
  text = open(report.write_report(str(out))[0]).read()
  assert 'mean of the last 4 evaluated rounds' in text and '| final | last 4 |' in text
  assert 'Both are means over the last 4 trained rounds' in text
  assert 'last 10' not in text


def test_the_noise_model_of_data_given_in_python_is_named_as_such():
  noise = lambda dataset, name: report._setup_items(
      {'data': {'dataset': dataset}, 'noise': {'name': name}})['Noise model']
  assert noise('custom', 'none') == 'the labels as given in Python'
  assert noise('custom', 'symmetric') == 'symmetric, flipping the labels given in Python'
  assert noise('digits', 'symmetric') == 'symmetric'


def test_a_last_round_section_reads_each_runs_last_record():
  class Demo(reporting.LastRoundSection):
    round_keys = ('demo',)
    title, explanation = 'Demo', 'What it shows.'
    columns = (('clients', 'clients'), ('share', 'share'))

    def summary_line(self, last):
      return f"share {last['share']}" if 'share' in last else None

  results = {'rounds': [{'round': 1, 'demo': {'clients': 2, 'share': 0.5}}, {'round': 2},
                        {'round': 3, 'demo': {'clients': 3, 'share': 0.75}}, {'round': 4}]}
  section = Demo()
  assert section.last(results) == {'clients': 3, 'share': 0.75, 'round': 3}
  assert section.summary(results) == ['share 0.75'] and section.summary({}) == []
  w = reporting.Writer('.')
  section.render(w, {None: {'m': [reporting.Run('.', 'm', None, 0, results)],
                            'other': [reporting.Run('o', 'other', None, 0, {'rounds': []})]}})
  assert w.lines[:3] == ['## Demo', '', 'What it shows.']
  rows = [line for line in w.lines if line.startswith('| ') and 'method' not in line]
  assert rows == ['| m | seed 0 | 3 | 3 | 0.750 |']  # No row for a run without one.
