"""The config's device: validation, the CPU path on this GPU-less machine, no key changes."""
import os
import sys

import pytest

from tff_noisy import config as config_lib
from tff_noisy import device
from tff_noisy import validation


def _keys(values: dict) -> set:
  """Every key of nested dicts."""
  keys = set(values)
  for value in values.values():
    if isinstance(value, dict):
      keys |= _keys(value)
  return keys


@pytest.mark.parametrize('value', ['tpu', 'GPU', ''])
def test_unknown_device_is_refused_naming_the_allowed_ones(value):
  with pytest.raises(config_lib.ConfigError,
                     match=f"^device: must be one of auto, cpu, gpu; got '{value}'$"):
    config_lib.from_dict({'device': value})


def test_device_defaults_to_auto_and_is_validated_whole():
  assert config_lib.from_dict({}).device == 'auto'
  for value in device.DEVICES:
    validation.validate_experiment(config_lib.from_dict(
        {'device': value, 'fl': {'client_runtime': 'tf'}}))


def test_a_gpu_with_the_tff_runtime_is_refused_naming_the_tf_runtime():
  with pytest.raises(config_lib.ConfigError, match="^device: gpu, but fl.client_runtime: tff "
                                                   ".* set fl.client_runtime: tf"):
    config_lib.from_dict({'device': 'gpu', 'fl': {'client_runtime': 'tff'}})
  # The default runtime, auto, is tf in process: the GPU is used.
  assert config_lib.resolve_client_runtime(
      config_lib.from_dict({'device': 'gpu'})).fl.client_runtime == 'tf'


def test_device_is_not_part_of_the_data_cache_key():
  hashes = {config_lib.from_dict({'device': d}).data_hash() for d in device.DEVICES}
  assert len(hashes) == 1
  assert 'device' not in _keys(config_lib.from_dict({'device': 'gpu'}).data_dict())


def test_cpu_is_hidden_through_the_environment_only_before_tensorflow(monkeypatch):
  monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)
  monkeypatch.setitem(sys.modules, 'tensorflow', object())  # Already loaded: too late.
  assert not device.hide_gpus_before_tensorflow('cpu')
  assert 'CUDA_VISIBLE_DEVICES' not in os.environ
  monkeypatch.delitem(sys.modules, 'tensorflow')
  for requested in ('auto', 'gpu'):
    assert not device.hide_gpus_before_tensorflow(requested)
    assert 'CUDA_VISIBLE_DEVICES' not in os.environ
  assert device.hide_gpus_before_tensorflow('cpu')
  assert os.environ['CUDA_VISIBLE_DEVICES'] == '-1'


def test_cpu_and_auto_use_the_cpu_without_a_gpu():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if tf.config.list_physical_devices('GPU'):
    pytest.skip('a GPU is visible')
  for requested in ('cpu', 'auto'):
    assert device.select(requested) == {'requested': requested, 'used': 'cpu', 'gpus': [],
                                        'tff_worker': 'cpu'}
  with pytest.raises(config_lib.ConfigError, match='^device: gpu, but TensorFlow sees no '
                     r'GPU.*use device: auto \(a GPU when there is one\) or cpu$'):
    device.select('gpu')
