"""``embed measure``: an encoder's kNN accuracy, NNC vote and LSC purity on a config's
clients, computed with the ops the methods use."""

import numpy as np
import pytest

from tff_noisy import config as config_lib
from tff_noisy.data import federated
from tff_noisy.embeddings import encoders
from tff_noisy.simulation import encoder_measure as measure
from tff_noisy.ops import knn


def _config(method='fedln_nnc', params=None):
  return config_lib.from_dict({
      'seed': 0, 'data': {'dataset': 'digits', 'train_subset': 400},
      'partition': {'name': 'iid', 'num_clients': 2},
      'noise': {'name': 'symmetric', 'rate': 0.4},
      'model': {'name': 'mlp', 'width': 16},
      'method': {'name': method, 'params': params or {'k': 10, 'pca_components': 8}},
      'fl': {'batch_size': 20}})


@pytest.fixture
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv('TFF_NOISY_CACHE', str(tmp_path))


def test_measure_on_a_tiny_set(cache):
  config = _config()
  data = federated.build_federated_data(config)
  row = measure.measure(config, data, 'pca')
  assert (row['nnc_k'], row['lsc_k'], row['lsc_batch_size']) == (10, 4, 20)
  assert row['embedding_width'] == 8
  _, embeddings = encoders.embed_training_inputs(
      measure.encoder_params(config, 'pca'), data, 0)
  true = np.concatenate([data.y_true[c] for c in data.client_ids])
  observed = np.concatenate([data.y[c] for c in data.client_ids])
  assert row['knn_accuracy'] == knn.knn_accuracy(embeddings, true, k=10, seed=0)
  assert row['nnc']['noise_before'] == pytest.approx(np.mean(observed != true))
  voted = np.concatenate([
      knn.knn_vote(embeddings[i * 200:(i + 1) * 200], data.y[c], 10, seed=i, num_classes=10)
      for i, c in enumerate(data.client_ids)])
  assert row['nnc']['noise_after'] == pytest.approx(np.mean(voted != true))
  assert 0 < row['lsc']['same_label_chance'] < row['lsc']['neighbour_purity'] <= 1
  lines = measure.table([row, {**row, 'seed': 1}]).splitlines()
  assert lines[2].startswith('| pca | 2 | ') and ' ± 0.0 |' in lines[2]


def test_lsc_configs_give_the_purity_their_k():
  config = _config('lsc', {'k': 6})
  assert measure.settings(config) == {'nnc_k': 100, 'lsc_k': 6, 'lsc_batch_size': 20}


def test_the_command_refuses_a_near_control_name_before_any_work(tmp_path, capsys):
  from experiments import run  # pylint: disable=g-import-not-at-top
  path = tmp_path / 'c.yaml'
  path.write_text('data: {dataset: digits}\nmethod: {name: fedln_nnc}\n')
  with pytest.raises(SystemExit):
    run.main(['embed', 'measure', str(path), '--encoders', 'pca,Control'])
  assert "needs the control's exact name 'control_supervised'" in capsys.readouterr().err
