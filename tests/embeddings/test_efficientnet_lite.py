"""EfficientNet-Lite0: the .pth read without PyTorch, the Keras port against the PyTorch
model's committed reference features, and the grayscale preprocessing."""

import importlib.util
import json
import os
import pickle

import numpy as np
import pytest

from tff_noisy.embeddings import efficientnet_lite
from tff_noisy.embeddings import torch_weights

_HERE = os.path.dirname(__file__)
_SCRIPT = os.path.join(_HERE, '..', '..', 'scripts', 'efficientnet_lite0_reference.py')


def _reference_script():
  spec = importlib.util.spec_from_file_location('efficientnet_lite0_reference', _SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_state_dict_reads_every_tensor_of_the_installed_weights():
  state = torch_weights.load_state_dict(efficientnet_lite.weights_path())
  assert len(state) == 296
  assert state['_conv_stem.weight'].shape == (32, 3, 3, 3)
  assert state['_fc.weight'].shape == (1000, 1280)
  parameters = sum(v.size for k, v in state.items() if not k.endswith('num_batches_tracked'))
  assert parameters == 4694024  # EfficientNet-Lite0's weights, BatchNorm statistics included.


def test_a_pickle_naming_another_global_is_refused(tmp_path):
  path = tmp_path / 'evil.pth'
  with open(path, 'wb') as f:
    for header in (0x1950a86a20f9469cfc6c, 1001, {}):
      pickle.dump(header, f, protocol=2)
    pickle.dump(os.system, f, protocol=2)
  with pytest.raises(torch_weights.TorchFileError, match='refusing to load posix.system'):
    torch_weights.load_state_dict(path)


def test_keras_port_matches_the_pytorch_models_reference_features():
  with open(os.path.join(_HERE, 'efficientnet_lite0_reference.json')) as f:
    reference = json.load(f)
  encoder = efficientnet_lite.EfficientNetLite0Encoder()
  features = encoder.features(_reference_script().reference_inputs())
  assert features.shape == (2, 1280)
  np.testing.assert_allclose(features[:, reference['indices']], reference['features'],
                             atol=1e-4, rtol=1e-4)
  np.testing.assert_allclose(np.linalg.norm(features, axis=1), reference['norms'], rtol=1e-5)
  np.testing.assert_allclose(features.mean(axis=1), reference['means'], atol=1e-5)


def test_grayscale_is_tiled_resized_and_normalised():
  gray = np.linspace(0, 1, 2 * 28 * 28, dtype=np.float32).reshape(2, 28, 28, 1)
  out = efficientnet_lite.preprocess(gray, (56, 56)).numpy()
  assert out.shape == (2, 56, 56, 3)
  np.testing.assert_array_equal(out[..., 0], out[..., 2])
  assert out.min() == pytest.approx(-127 / 128, abs=1e-3)
  assert out.max() == pytest.approx(1.0, abs=2e-3)
