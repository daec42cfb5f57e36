"""Files the project writes: whole or not at all, with the mode the umask gives an ordinary
file or folder."""
import errno
import os
import stat

import pytest

from tff_noisy import files
from tff_noisy.errors import OutputError


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


def test_a_file_written_for_a_person_is_whole_or_not_there_with_one_line(tmp_path,
                                                                          monkeypatch):
  path = tmp_path / 'new' / 'evaluation.json'
  files.write_file(str(path), b'{"a": 1}')  # Its folder is created.
  assert path.read_bytes() == b'{"a": 1}'

  def full(fd):
    raise OSError(errno.ENOSPC, 'No space left on device')
  monkeypatch.setattr(os, 'fsync', full)
  with pytest.raises(OutputError) as error:
    files.write_file(str(path), b'{"a": 2}')
  assert str(error.value) == (f'cannot write {path}: No space left on device: the disk is '
                              'full')
  assert path.read_bytes() == b'{"a": 1}' and os.listdir(path.parent) == [path.name]
