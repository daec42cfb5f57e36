"""results.json is strict JSON (undefined values are null, never NaN or Infinity), and a
run's files are written whole or not at all."""
import errno
import json
import os

import numpy as np
import pytest

from tff_noisy.errors import OutputError
from tff_noisy.simulation import results as results_lib


def _reject_constant(name):
  raise ValueError(f'non-standard JSON constant {name}')


def test_non_finite_values_are_written_as_null(tmp_path):
  results = results_lib.Results(
      config={}, data_hash='h', method='fedln', params={'nu': 75.0},
      rounds=[{'round': 1, 'test_accuracy': 0.5, 'noise_estimate_correlation': float('nan')}],
      client_noise_rates={'client_000': 0.0},
      extra={'label_correction': {'overall': {'precision': float('nan'),
                                              'fixed': float('inf'), 'corrupted': 0.25}},
             'curve': [1.0, float('-inf')]})
  results_lib.write(str(tmp_path), results)
  saved = json.loads((tmp_path / results_lib.RESULTS_FILE).read_text(),
                     parse_constant=_reject_constant)
  assert saved['rounds'][0]['noise_estimate_correlation'] is None
  assert saved['extra']['label_correction']['overall'] == {
      'precision': None, 'fixed': None, 'corrupted': 0.25}
  assert saved['extra']['curve'] == [1.0, None]
  assert saved['final_accuracy'] == 0.5 and saved['params'] == {'nu': 75.0}


def _results(accuracy):
  return results_lib.Results(config={}, data_hash='h', method='fedavg', params={},
                             rounds=[{'round': 1, 'test_accuracy': accuracy}],
                             client_noise_rates={})


def _disk_full_after(monkeypatch, good_writes):
  """``os.fsync`` fails with ENOSPC after ``good_writes`` successful calls."""
  real, calls = os.fsync, []

  def fsync(fd):
    calls.append(fd)
    if len(calls) > good_writes:
      raise OSError(errno.ENOSPC, 'No space left on device')
    return real(fd)

  monkeypatch.setattr(os, 'fsync', fsync)


@pytest.mark.parametrize('good_writes', [0, 1])
def test_a_full_disk_leaves_the_previous_files_whole_and_says_so(tmp_path, monkeypatch,
                                                                 good_writes):
  results_lib.write(str(tmp_path), _results(0.25))
  results_lib.save_final_weights(str(tmp_path), [np.ones(3)])
  before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
  _disk_full_after(monkeypatch, good_writes)
  with pytest.raises(OutputError, match=r'could not write .*(results\.json|metrics\.csv): '
                     'No space left on device; .* --resume'):
    results_lib.write(str(tmp_path), _results(0.75))
  with pytest.raises(OutputError, match=r'final_weights\.npz'):
    results_lib.save_final_weights(str(tmp_path), [np.zeros(3)])
  assert sorted(os.listdir(tmp_path)) == sorted(before)  # No partial file is left.
  assert (tmp_path / results_lib.RESULTS_FILE).read_bytes() == before[results_lib.RESULTS_FILE]
  assert (tmp_path / results_lib.WEIGHTS_FILE).read_bytes() == before[results_lib.WEIGHTS_FILE]
