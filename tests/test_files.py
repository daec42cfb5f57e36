"""Files the project writes get the mode the umask gives an ordinary file or folder."""
import os
import stat

import pytest

from tff_noisy import files


@pytest.mark.parametrize('mask', [0o022, 0o002, 0o077])
def test_written_files_and_checkpoint_folders_honour_the_umask(tmp_path, mask):
  old = os.umask(mask)
  try:
    assert files.umask() == mask
    path = tmp_path / 'results.json'
    files.write_atomically(str(path), b'{}')
    folder = files.make_temporary_dir('.round.', str(tmp_path))
  finally:
    os.umask(old)
  assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
  assert stat.S_IMODE(os.stat(folder).st_mode) == 0o777 & ~mask
  assert path.read_bytes() == b'{}'


def test_portable_paths_name_no_directory_outside_the_repository(tmp_path):
  root = tmp_path / 'repo'
  (root / 'experiments' / 'configs').mkdir(parents=True)
  inside = root / 'benchmarks' / '..' / 'experiments' / 'configs' / 'demo.yaml'
  assert files.portable_path(str(inside), str(root)) == 'experiments/configs/demo.yaml'
  assert files.portable_path('/tmp/bcache', str(root)) == 'bcache'
  assert files.portable_overrides(
      ['data.cache_dir=/tmp/bcache', 'fl.rounds=10', f'data.data_dir={root}/data'],
      str(root)) == ['data.cache_dir=bcache', 'fl.rounds=10', 'data.data_dir=data']
