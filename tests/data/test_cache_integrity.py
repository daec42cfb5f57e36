"""The federated-data cache: a corrupt entry is rebuilt; an unwritable one fails early."""
import os

import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy.config import ConfigError
from tff_noisy.data import federated
from tff_noisy.data import sources


def _config(cache):
  return config_lib.from_dict({'data': {'dataset': 'digits', 'cache_dir': str(cache)},
                               'partition': {'num_clients': 4},
                               'noise': {'name': 'symmetric', 'rate': 0.3}})


def _truncate(path):
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def _garble(path):
  with open(path, 'r+b') as f:
    f.seek(os.path.getsize(path) // 2)
    f.write(b'\xff' * 64)


def _drop_checksum(path):
  os.remove(path + '.sha256')


def _wrong_checksum(path):
  with open(path + '.sha256', 'w') as f:
    f.write('0' * 64)


@pytest.mark.parametrize('damage, problem', [
    (_truncate, 'cannot be read'),
    (_garble, ''),  # np.load's CRC check or the checksum, whichever notices first.
    (_drop_checksum, 'has no data-v1.npz.sha256'),
    (_wrong_checksum, 'does not match data-v1.npz.sha256'),
])
def test_corrupt_cache_entry_is_reported_and_rebuilt(tmp_path, capsys, monkeypatch, damage,
                                                     problem):
  config = _config(tmp_path)
  fresh = federated.build_federated_data(config)
  path = os.path.join(federated.cache_dir(config), federated.CACHE_FILE)
  damage(path)
  rebuilt = federated.build_federated_data(config)
  warning = capsys.readouterr().err.strip()
  assert warning.startswith(f'tff-noisy: warning: data cache {path} ') and '\n' not in warning
  assert problem in warning and warning.endswith('; rebuilding it')
  for cid in fresh.client_ids:
    np.testing.assert_array_equal(rebuilt.x[cid], fresh.x[cid])
    np.testing.assert_array_equal(rebuilt.y[cid], fresh.y[cid])

  def no_build(*args):
    raise AssertionError('the rebuilt cache entry should have been used')

  monkeypatch.setattr(federated, '_build_arrays', no_build)
  federated.build_federated_data(config)
  assert capsys.readouterr().err == ''


def _no_source(*args):
  raise AssertionError('an unwritable cache must fail before the build')


def test_unwritable_cache_fails_before_the_build_naming_the_setting(tmp_path, monkeypatch):
  (tmp_path / 'file').write_text('x')
  monkeypatch.setattr(sources, 'load_dataset', _no_source)
  with pytest.raises(ConfigError, match=r'^data\.cache_dir: cannot write the data cache '
                     r'.*/file/sub/\w+: .*/file is not a directory$'):
    federated.build_federated_data(_config(tmp_path / 'file' / 'sub'))
  monkeypatch.setenv(sources.CACHE_ENV, str(tmp_path / 'file'))
  config = config_lib.from_dict({'data': {'dataset': 'digits'}})
  with pytest.raises(ConfigError, match=r'^\$TFF_NOISY_CACHE: cannot write'):
    federated.build_federated_data(config)
