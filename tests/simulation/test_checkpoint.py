"""Checkpoints: round trip, identity, run length, corruption fallback, retention."""
import collections
import dataclasses
import errno
import json
import os
import re

import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy.errors import OutputError
from tff_noisy.federated import process as process_lib
from tff_noisy.simulation import checkpoint
from tff_noisy.simulation.client_state import ClientStateStore

_SHAPES = [(2, 3), (3,)]


def _state(offset):
  return collections.OrderedDict(
      weights=[np.arange(6.0).reshape(2, 3) + offset, np.ones(3) * offset],
      optimizer=collections.OrderedDict(step=np.int64(offset)))


def _identity(**overrides):
  values = {'fl': {'rounds': 10}}
  for key, value in overrides.items():
    section, _, field = key.rpartition('.')
    (values.setdefault(section, {}) if section else values)[field] = value
  config = config_lib.resolve_client_runtime(config_lib.from_dict(values))
  return checkpoint.identity_of(config, _SHAPES)


def _save(directory, round_num, identity=None):
  checkpoint.save(str(directory), round_num, _state(round_num), ClientStateStore(),
                  [{'round': r} for r in range(1, round_num + 1)], identity or _identity())


def _load(directory, identity=None, rounds=10):
  return checkpoint.load(str(directory), _state(0), identity or _identity(), rounds)


def test_round_trip_keeps_the_last_two_checkpoints(tmp_path):
  store = ClientStateStore()
  store.set('client_000', 'labels', np.array([1, 2, 3]))
  store.set('client_001', 'noise_estimate', 0.25)
  directory = tmp_path / 'ckpt'
  _save(directory, 2)
  _save(directory, 4)
  checkpoint.save(str(directory), 6, _state(6), store, [{'round': 6}], _identity())
  round_num, state, loaded, history, parts = _load(directory)
  assert parts == []
  assert round_num == 6 and history == [{'round': 6}]
  np.testing.assert_array_equal(state['weights'][0], _state(6)['weights'][0])
  assert int(state['optimizer']['step']) == 6
  np.testing.assert_array_equal(loaded.get('client_000', 'labels'), [1, 2, 3])
  assert loaded.get('client_001', 'noise_estimate') == 0.25
  assert loaded.get('client_002', 'labels', 'absent') == 'absent'
  assert sorted(p.name for p in directory.iterdir()) == ['round_00004', 'round_00006']


def test_missing_checkpoint_is_none(tmp_path):
  assert _load(tmp_path / 'none') is None


@pytest.mark.parametrize('overrides, expected', [
    ({'seed': 1}, 'seed: checkpoint 0, this run 1'),
    ({'method.name': 'fedprox'}, 'method.name: checkpoint "fedavg", this run "fedprox"'),
    ({'fl.client_lr': 0.01}, 'fl.client_lr: checkpoint 0.05, this run 0.01'),
    ({'noise.rate': 0.5}, 'noise.rate: checkpoint 0.0, this run 0.5'),
])
def test_checkpoint_of_another_run_is_refused_field_by_field(tmp_path, overrides, expected):
  _save(tmp_path, 2)
  with pytest.raises(checkpoint.CheckpointError) as error:
    _load(tmp_path, _identity(**overrides))
  message = str(error.value)
  assert expected in message and 'belongs to another run' in message
  assert '--overwrite' in message and '--out' in message and '\n' not in message


def test_a_method_default_changed_since_the_checkpoint_is_another_run(tmp_path):
  """The identity holds the resolved method parameters: a default that changed between
  a checkpoint and its resume (the config, written without it, is the same) is refused,
  named; a checkpoint written before identities held them is compared on the rest."""
  config = config_lib.resolve_client_runtime(config_lib.from_dict(
      {'method': {'name': 'fedcorr'}, 'fl': {'rounds': 200}}))
  then = checkpoint.identity_of(config, _SHAPES, method_params={'mixup': False, 't1': 5})
  now = checkpoint.identity_of(config, _SHAPES, method_params={'mixup': True, 't1': 5})
  _save(tmp_path, 2, then)
  with pytest.raises(checkpoint.CheckpointError,
                     match='belongs to another run \\(method.resolved.mixup: checkpoint '
                           'false, this run true\\)'):
    _load(tmp_path, now)
  assert _load(tmp_path, then).round_num == 2
  _save(tmp_path / 'older', 2, checkpoint.identity_of(config, _SHAPES))
  assert _load(tmp_path / 'older', now).round_num == 2


def test_a_method_default_stated_in_the_config_is_the_same_run(tmp_path):
  """``mu: 5.0`` (MOON's default) written out on resume continues a checkpoint written
  without it: the parameters are compared resolved; another value is refused, named."""
  def identity(params, resolved):
    config = config_lib.resolve_client_runtime(config_lib.from_dict(
        {'method': {'name': 'moon', 'params': params}, 'fl': {'rounds': 10}}))
    return checkpoint.identity_of(config, _SHAPES, method_params=resolved)

  _save(tmp_path, 2, identity({}, {'mu': 5.0, 'tau': 0.5}))
  assert _load(tmp_path, identity({'mu': 5.0}, {'mu': 5.0, 'tau': 0.5})).round_num == 2
  with pytest.raises(checkpoint.CheckpointError,
                     match=r'\(method.resolved.mu: checkpoint 5.0, this run 1.0\)'):
    _load(tmp_path, identity({'mu': 1.0}, {'mu': 1.0, 'tau': 0.5}))


def test_other_model_shapes_are_refused_before_tff_sees_them(tmp_path):
  _save(tmp_path, 2)
  other = checkpoint.identity_of(
      config_lib.resolve_client_runtime(config_lib.from_dict({'fl': {'rounds': 10}})),
      [(4, 3), (3,)])
  with pytest.raises(checkpoint.CheckpointError,
                     match=r'weight_shapes: checkpoint \[\[2, 3\], \[3\]\], this run '
                           r'\[\[4, 3\], \[3\]\]'):
    _load(tmp_path, other)
  with pytest.raises(checkpoint.CheckpointError, match='different model or method'):
    checkpoint.load(str(tmp_path), {'only': np.zeros(1)}, _identity(), 10)
  with pytest.raises(checkpoint.CheckpointError,
                     match=r'state tensor \d has shape \(2, 3\) but this config builds \(3, 2\)'):
    checkpoint.load(str(tmp_path), collections.OrderedDict(
        weights=[np.zeros((3, 2)), np.zeros(3)],
        optimizer=collections.OrderedDict(step=np.int64(0))), _identity(), 10)


def test_device_is_not_part_of_the_identity(tmp_path):
  _save(tmp_path, 2, _identity(device='cpu'))  # E.g. checkpointed on a CPU machine.
  assert 'device' not in _identity()
  assert _identity(device='gpu') == _identity(device='cpu') == _identity()
  assert _load(tmp_path, _identity(device='auto')).round_num == 2


def test_auto_runtime_is_resolved_before_the_identity(tmp_path):
  auto = config_lib.from_dict({'fl': {'rounds': 10}})
  assert auto.fl.client_runtime == 'auto'
  with pytest.raises(ValueError, match='resolve fl.client_runtime: auto first'):
    checkpoint.identity_of(auto, _SHAPES)
  assert config_lib.resolve_client_runtime(auto).fl.client_runtime == 'tf'
  assert config_lib.resolve_client_runtime(auto, on_workers=True).fl.client_runtime == 'tff'
  # A checkpoint written before the field existed (or on tff) leaves it out: it ran on
  # tff, so 'auto' resolved to tf in process is another run, named as such.
  _save(tmp_path, 2, _identity(**{'fl.client_runtime': 'tff'}))
  assert 'fl.client_runtime' not in _identity(**{'fl.client_runtime': 'tff'})
  with pytest.raises(checkpoint.CheckpointError,
                     match='fl.client_runtime: checkpoint "tff", this run "tf"'):
    _load(tmp_path)
  assert _load(tmp_path, _identity(**{'fl.client_runtime': 'tff'})).round_num == 2


@pytest.mark.parametrize('values, on_workers, message', [
    ({'fl': {'client_runtime': 'tf'}}, True,
     "--workers: with fl.client_runtime: tf the clients train in this process's TensorFlow"),
    ({'fl': {'client_runtime': 'tflite'}}, True, '--workers: with fl.client_runtime: tflite'),
    ({'device': 'gpu'}, True, "device: gpu, but fl.client_runtime: tff trains clients in TFF's"),
])
def test_runtime_that_cannot_run_there_is_refused(values, on_workers, message):
  config = config_lib.from_dict(values)
  with pytest.raises(config_lib.ConfigError, match='^' + re.escape(message)):
    config_lib.resolve_client_runtime(config, on_workers)


def test_gpu_with_tff_is_refused_when_the_config_is_read():
  with pytest.raises(config_lib.ConfigError, match="^device: gpu, but fl.client_runtime: tff"):
    config_lib.from_dict({'device': 'gpu', 'fl': {'client_runtime': 'tff'}})
  assert config_lib.resolve_client_runtime(
      config_lib.from_dict({'device': 'gpu'})).fl.client_runtime == 'tf'


def test_run_length_may_grow_but_not_shrink(tmp_path):
  _save(tmp_path, 6)
  longer = _identity(**{'fl.rounds': 20, 'fl.eval_every': 5, 'fl.checkpoint_every': 2})
  assert longer == _identity()
  assert _load(tmp_path, longer, rounds=20).round_num == 6
  assert _load(tmp_path, rounds=6).round_num == 6
  with pytest.raises(checkpoint.CheckpointError,
                     match='at round 6, past fl.rounds=4: a run cannot be shortened'):
    _load(tmp_path, rounds=4)


def _truncate(path):
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def _garble(path):
  path.write_text('{"round": 4, "hist')


def _empty(path):
  path.write_bytes(b'')


@pytest.mark.parametrize('damage, name, reason', [
    (_truncate, 'state.npz', 'state.npz does not match its checksum'),
    (_garble, 'meta.json', 'cannot be read'),
    (_empty, 'client_state.npz', 'client_state.npz does not match its checksum'),
    (os.remove, 'state.npz', 'state.npz: No such file or directory'),
])
def test_corrupt_latest_falls_back_to_the_one_before(tmp_path, capsys, damage, name, reason):
  _save(tmp_path, 2)
  _save(tmp_path, 4)
  damage(tmp_path / 'round_00004' / name)
  loaded = _load(tmp_path)
  assert loaded.round_num == 2
  np.testing.assert_array_equal(loaded.state['weights'][1], _state(2)['weights'][1])
  warning = capsys.readouterr().err.strip()
  assert warning.startswith('tff-noisy: warning: checkpoint ') and '\n' not in warning
  assert str(tmp_path / 'round_00004') in warning and reason in warning
  assert f'resuming from {tmp_path / "round_00002"}' in warning


def _fifo(path):
  os.remove(path)
  os.mkfifo(path)


def _device(path):
  os.remove(path)
  os.symlink('/dev/zero', path)


@pytest.mark.parametrize('damage', [_fifo, _device])
@pytest.mark.parametrize('name', ['meta.json', 'state.npz', 'client_state.npz'])
def test_a_fifo_or_device_in_a_checkpoint_is_unusable_not_read(tmp_path, capsys, damage, name):
  _save(tmp_path, 2)
  _save(tmp_path, 4)
  damage(tmp_path / 'round_00004' / name)
  assert _load(tmp_path).round_num == 2
  assert f'({name} is not a regular file) is unusable; resuming from' in capsys.readouterr().err
  damage(tmp_path / 'round_00002' / name)
  with pytest.raises(checkpoint.CheckpointError, match=f'{name} is not a regular file'):
    _load(tmp_path)


def test_no_usable_checkpoint_is_a_clear_error(tmp_path):
  _save(tmp_path, 2)
  _save(tmp_path, 4)
  _truncate(tmp_path / 'round_00004' / 'state.npz')
  _garble(tmp_path / 'round_00002' / 'meta.json')
  with pytest.raises(checkpoint.CheckpointError) as error:
    _load(tmp_path)
  message = str(error.value)
  assert message.startswith(f'no usable checkpoint in {tmp_path}')
  assert 'round_00004 (state.npz does not match' in message and 'round_00002' in message
  assert '--overwrite' in message


def test_save_after_a_fallback_replaces_the_stale_later_checkpoints(tmp_path):
  _save(tmp_path, 2)
  _save(tmp_path, 4)
  _save(tmp_path, 6)
  _truncate(tmp_path / 'round_00006' / 'state.npz')
  assert _load(tmp_path).round_num == 4
  _save(tmp_path, 5)  # The resumed run goes on from round 4.
  assert sorted(p.name for p in tmp_path.iterdir()) == ['round_00004', 'round_00005']
  _save(tmp_path, 6)
  assert _load(tmp_path).round_num == 6


def test_an_interrupted_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
  _save(tmp_path, 2)

  def fail(*args, **kwargs):
    raise KeyboardInterrupt

  monkeypatch.setattr(os, 'replace', fail)
  with pytest.raises(KeyboardInterrupt):
    _save(tmp_path, 4)
  monkeypatch.undo()
  assert sorted(p.name for p in tmp_path.iterdir()) == ['round_00002']
  assert _load(tmp_path).round_num == 2


def _server_state(offset):
  return process_lib.ServerState(
      global_model_weights=[np.ones(3) * offset], distributor=(),
      client_work=collections.OrderedDict(corrected=np.int32(offset)),
      aggregator=(), finalizer=[np.float32(offset + 0.5)],
      controller=collections.OrderedDict(best=np.float32(offset + 0.25),
                                         count=np.int32(offset + 2)))


def test_controller_round_trip_and_a_checkpoint_from_before_the_slot(tmp_path):
  """The controller comes back in its slot; a checkpoint written when the controller's
  values followed the hparams (no ``state_layout`` in meta.json) is reordered."""
  directory = tmp_path / 'ckpt'
  checkpoint.save(str(directory), 3, _server_state(3), ClientStateStore(), [], _identity())
  loaded = checkpoint.load(str(directory), _server_state(0), _identity(), 10).state
  assert int(loaded.controller['count']) == 5 and float(loaded.finalizer[0]) == 3.5

  state = _server_state(7)
  old_layout = [state.global_model_weights, state.client_work, state.controller,
                state.finalizer]  # Flattens as the state did before the controller slot.
  checkpoint.save(str(directory), 7, old_layout, ClientStateStore(), [], _identity())
  meta_path = directory / 'round_00007' / 'meta.json'
  meta = json.loads(meta_path.read_text())
  del meta['state_layout']
  meta_path.write_text(json.dumps(meta))
  loaded = checkpoint.load(str(directory), _server_state(0), _identity(), 10).state
  assert float(loaded.finalizer[0]) == 7.5 and int(loaded.client_work['corrected']) == 7
  assert float(loaded.controller['best']) == 7.25 and int(loaded.controller['count']) == 9


def test_a_full_disk_while_checkpointing_is_one_error_naming_the_intact_checkpoint(
    tmp_path, monkeypatch):
  directory = tmp_path / 'ckpt'
  _save(directory, 2)

  def no_space(fd):
    raise OSError(errno.ENOSPC, 'No space left on device')

  monkeypatch.setattr(os, 'fsync', no_space)
  with pytest.raises(OutputError, match='checkpoint of round 4 .*No space left on device; '
                     'the checkpoint of round 2 is intact: .*--resume'):
    _save(directory, 4)
  monkeypatch.undo()
  assert sorted(p.name for p in directory.iterdir()) == ['round_00002']
  assert _load(directory).round_num == 2


def test_a_method_parameter_added_since_the_checkpoint_at_its_default_is_the_same_run(
    tmp_path):
  """Ditto's ``test_fraction`` (``Params.added_fields``) left at the value its absence
  means continues a checkpoint written before it existed; another value is refused."""
  from tff_noisy.methods.ditto import DittoParams  # pylint: disable=g-import-not-at-top
  config = config_lib.resolve_client_runtime(config_lib.from_dict(
      {'method': {'name': 'ditto'}, 'fl': {'rounds': 10}}))
  def identity(**values):
    params = dataclasses.asdict(DittoParams(**values))
    return checkpoint.identity_of(config, _SHAPES,
                                  method_params=DittoParams.identifying(params))
  _save(tmp_path, 2, checkpoint.identity_of(config, _SHAPES,
                                            method_params={'variant': 'fedefc', 'lam': 0.1}))
  assert _load(tmp_path, identity()).round_num == 2
  with pytest.raises(checkpoint.CheckpointError, match='method.resolved.test_fraction'):
    _load(tmp_path, identity(test_fraction=0.2))
