"""``tff-noisy grid --jobs 2`` and ``compare --jobs 2``: the runs are ``tff-noisy run``
processes, both at once, and every run's accuracy per round equals the one-at-a-time
study's, run in-process."""
import json
import os

import pytest

from experiments import run as cli

_DEMO = os.path.join(os.path.dirname(__file__), '..', 'experiments', 'configs', 'demo.yaml')
_CELLS = ['default/seed1/fedavg', 'default/seed1/fedprox']


def _accuracies(out) -> dict:
  return {cell: [r['test_accuracy'] for r in json.loads(
      (out / cell / 'results.json').read_text())['rounds']] for cell in _CELLS}


@pytest.mark.slow
def test_two_jobs_give_the_results_of_one_at_a_time(tmp_path, capfd):
  grid = ['grid', _DEMO, '--methods', 'fedavg,fedprox', '--seeds', '1', '--set',
          'fl.rounds=3', '--set', 'method.name=fedavg', '--set', 'method.params={}']
  cli.main(grid + ['--out', str(tmp_path / 'one')])
  cli.main(grid + ['--out', str(tmp_path / 'two'), '--jobs', '2'])
  assert _accuracies(tmp_path / 'two') == _accuracies(tmp_path / 'one')
  assert (tmp_path / 'two/grid.csv').read_text() == (tmp_path / 'one/grid.csv').read_text()
  err = capfd.readouterr().err
  assert err.count(' started (its output: ') == 2
  assert '[grid] cell 2 of 2: default/seed1/fedprox done in ' in err
  log = (tmp_path / 'two/logs/default__seed1__fedprox.log').read_text()
  assert 'fedprox: final accuracy' in log  # The run's own last line.
  # --resume of a finished grid keeps every run: no process starts.
  cli.main(grid + ['--out', str(tmp_path / 'two'), '--jobs', '2', '--resume'])
  assert _accuracies(tmp_path / 'two') == _accuracies(tmp_path / 'one')
  err = capfd.readouterr().err
  assert '[grid] 2 of 2 cells finished earlier with the same config: kept; 0 to run' in err
  assert ' started ' not in err


@pytest.mark.slow
def test_compare_with_two_jobs_gives_the_results_of_one_at_a_time(tmp_path, capfd):
  compare = ['compare', _DEMO, '--methods', 'fedavg,fedprox', '--set', 'fl.rounds=3',
             '--set', 'method.name=fedavg', '--set', 'method.params={}']
  cli.main(compare + ['--out', str(tmp_path / 'one')])
  cli.main(compare + ['--out', str(tmp_path / 'two'), '--jobs', '2'])
  for method in ('fedavg', 'fedprox'):
    one, two = (json.loads((tmp_path / d / method / 'results.json').read_text())
                for d in ('one', 'two'))
    assert [r['test_accuracy'] for r in two['rounds']] == [
        r['test_accuracy'] for r in one['rounds']]
  assert ((tmp_path / 'two/comparison.csv').read_text()
          == (tmp_path / 'one/comparison.csv').read_text())
  assert (tmp_path / 'two/comparison.png').exists()
  out, err = capfd.readouterr()
  assert '[compare] run 2 of 2: fedprox done in ' in err
  assert 'fedprox: final accuracy' in (tmp_path / 'two/logs/fedprox.log').read_text()
  assert out.count('\nfedprox ') == 2  # Both print the final table.
