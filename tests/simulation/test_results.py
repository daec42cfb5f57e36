"""results.json is strict JSON: undefined values are null, never NaN or Infinity."""
import json

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
