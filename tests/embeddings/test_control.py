"""The control encoder: refused unless named exactly, trained only on images no client
holds, cached."""

import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy.data import federated
from tff_noisy.embeddings import control
from tff_noisy.embeddings import encoders
from tff_noisy.embeddings.params import EncoderParams
from tff_noisy.errors import ConfigError


def _config(train_subset=600):
  return config_lib.from_dict({
      'seed': 0, 'data': {'dataset': 'digits', 'train_subset': train_subset},
      'partition': {'name': 'iid', 'num_clients': 3},
      'noise': {'name': 'symmetric', 'rate': 0.4},
      'model': {'name': 'mlp', 'width': 16},
      'method': {'name': 'fedln_nnc', 'params': {'k': 10}}})


@pytest.fixture
def data(tmp_path, monkeypatch):
  monkeypatch.setenv('TFF_NOISY_CACHE', str(tmp_path))
  return federated.build_federated_data(_config())


@pytest.mark.parametrize('name', ['control', 'supervised', 'Control_Supervised',
                                  'control-supervised', 'supervised_control'])
def test_a_near_name_is_refused(name):
  with pytest.raises(ConfigError, match="method.params.encoder: needs the control's exact "
                     "name 'control_supervised'"):
    EncoderParams(encoder=name).check(10)


def test_the_exact_name_passes_the_check():
  EncoderParams(encoder='control_supervised').check(10)


def test_the_builder_refuses_any_other_route(data):
  inputs = np.concatenate([data.x[c] for c in data.client_ids])
  with pytest.raises(ConfigError, match='built only where a config names'):
    encoders.control_encoder(EncoderParams(encoder='pca'), inputs, 0, data)
  with pytest.raises(ConfigError, match='built only where a config names'):
    encoders.control_encoder(EncoderParams(encoder='control_supervised'), inputs, 0)


def test_held_out_images_are_those_no_client_holds(data):
  x, y = control.held_out(data)
  clients = {row.tobytes() for c in data.client_ids for row in data.x[c]}
  assert len(x) == len(y) == 1437 - 600  # digits' training split less the clients'.
  assert not any(row.tobytes() in clients for row in x)


def test_no_held_out_images_is_one_clear_error(tmp_path, monkeypatch):
  monkeypatch.setenv('TFF_NOISY_CACHE', str(tmp_path))
  data = federated.build_federated_data(_config(train_subset=None))
  with pytest.raises(ConfigError, match="'control_supervised' needs training images no "
                     'client holds: the clients hold 1437 of 1437'):
    encoders.embedding_width(EncoderParams(encoder='control_supervised'), data)


def test_trained_once_then_loaded_from_the_cache(data, monkeypatch, capsys):
  params = EncoderParams(encoder='control_supervised')
  first, embeddings = encoders.embed_training_inputs(params, data, 0)
  assert first.encoder_id.startswith('control-supervised-clean-labels-')
  assert 'a control trained with the clean labels' in capsys.readouterr().err
  np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)

  def no_training(self):
    raise AssertionError('trained again')

  monkeypatch.setattr(control.SupervisedControlEncoder, '_train', no_training)
  inputs = np.concatenate([data.x[c] for c in data.client_ids])
  again = encoders.build_encoder(params, inputs, 0, data)
  assert again.encoder_id == first.encoder_id
  np.testing.assert_allclose(again.embed(inputs), embeddings, atol=1e-6)
