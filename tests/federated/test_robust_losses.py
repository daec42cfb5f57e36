"""The robust-loss baselines as methods: their clients train on the loss of
``ops.baseline_losses_tf``, stack in the tf runtime and can train on devices."""
import os

import numpy as np
import pytest
import tensorflow as tf

import models
from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy.federated import algorithms
from tff_noisy.ops import baseline_losses
from tff_noisy.runtime import stacked
from tff_noisy.simulation import driver

_DEMO = os.path.join(os.path.dirname(__file__), '..', '..', 'experiments', 'configs',
                     'demo.yaml')

_NUMPY = {'label_smoothing': ('label_smoothing_cross_entropy', ('smoothing',)),
          'bi_tempered': ('bi_tempered_logistic_loss', ('t1', 't2', 'smoothing', 'num_iters')),
          'sce': ('symmetric_cross_entropy', ('alpha', 'beta', 'log_zero')),
          'gce': ('generalized_cross_entropy', ('q',))}


@pytest.mark.parametrize('name', sorted(_NUMPY))
def test_the_objective_is_the_loss_and_runs_stacked_and_on_devices(name):
  params = methods.resolve_params(name, {}, rounds=10)
  objective = algorithms.method_class(name).objective(params, None)
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(7, 10)).astype(np.float32)
  labels = rng.integers(0, 10, 7)
  function, keys = _NUMPY[name]
  expected = getattr(baseline_losses, function)(labels, logits,
                                                **{k: getattr(params, k) for k in keys})
  got = objective.loss({'y': tf.constant(labels)}, tf.constant(logits), None, {}, {}, None)
  np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
  assert stacked.unstackable_reason(models.build_model('mlp', (8, 8, 1), 10), objective) == ''
  assert objective.device_unsupported_reason() == ''


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(_NUMPY))
def test_each_baseline_trains_the_demo_config(tmp_path, tmp_cache, name):
  config = config_lib.load(_DEMO, [f'method.name={name}', 'method.params={}', 'fl.rounds=3',
                                   'fl.client_runtime=tf'])
  results = driver.run_experiment(config, str(tmp_path / name), progress=False)
  assert results.method == name and len(results.rounds) == 3
  assert all(np.isfinite(r['train_loss']) for r in results.rounds)
  assert results.final_accuracy > 0.3  # Learning: 10 classes, chance is 0.1.


