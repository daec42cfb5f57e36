"""The baselines as methods: the robust losses' clients train on the loss of
``ops.baseline_losses_tf``, stack in the tf runtime and can train on devices; Confident
Learning's clients train without the label issues they flag."""
import os

import numpy as np
import pytest
import tensorflow as tf

from experiments import run as cli
import models
from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy.federated.client_parts import ClientContext, ClientProgram, Outputs
from tff_noisy.ops import baseline_losses
from tff_noisy.runtime import stacked
from tff_noisy.simulation import driver
from tff_noisy.simulation import results as results_lib

_DEMO = os.path.join(os.path.dirname(__file__), '..', '..', 'experiments', 'configs',
                     'demo.yaml')

_NUMPY = {'label_smoothing': ('label_smoothing_cross_entropy', ('smoothing',)),
          'bi_tempered': ('bi_tempered_logistic_loss', ('t1', 't2', 'smoothing', 'num_iters')),
          'sce': ('symmetric_cross_entropy', ('alpha', 'beta', 'log_zero')),
          'gce': ('generalized_cross_entropy', ('q',))}


@pytest.mark.parametrize('name', sorted(_NUMPY))
def test_the_client_parts_are_the_loss_and_run_stacked_and_on_devices(name):
  params = methods.resolve_params(name, {}, rounds=10)
  program = ClientProgram(methods.METHODS[name].resolve()(params, None).parts)
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(7, 10)).astype(np.float32)
  labels = rng.integers(0, 10, 7)
  function, keys = _NUMPY[name]
  expected = getattr(baseline_losses, function)(labels, logits,
                                                **{k: getattr(params, k) for k in keys})
  got = program.loss({'y': tf.constant(labels)}, Outputs(tf.constant(logits)), ClientContext({}))
  np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
  assert stacked.unstackable_reason(models.build_model('mlp', (8, 8, 1), 10), program) == ''
  assert program.device_reason() == ''


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(_NUMPY) + ['confident_learning'])
def test_each_baseline_trains_the_demo_config_from_the_command_line(tmp_path, tmp_cache,
                                                                     name):
  out = tmp_path / name
  cli.main(['run', _DEMO, '--out', str(out), '--set', f'method.name={name}', '--set',
            'method.params={}', '--set', 'fl.rounds=3', '--set', 'fl.client_runtime=tf'])
  results = results_lib.load(str(out))
  assert results['method'] == name and len(results['rounds']) == 3
  assert all(np.isfinite(r['train_loss']) for r in results['rounds'])
  assert results['final_accuracy'] > 0.3  # Learning: 10 classes, chance is 0.1.


@pytest.mark.slow
def test_confident_learning_drops_flagged_examples_scored_against_the_truth(tmp_path,
                                                                           tmp_cache):
  """Symmetric noise 0.3 on every demo client: cleanlab's flags on each client's own
  5-fold probabilities (measured: precision 0.71, recall 0.87)."""
  config = config_lib.load(_DEMO, ['method.name=confident_learning', 'method.params={}',
                                   'fl.rounds=2', 'fl.client_runtime=tf',
                                   'noise.name=symmetric', 'noise.rate=0.3',
                                   'noise.noisy_fraction=1.0'])
  results = driver.run_experiment(config, str(tmp_path / 'cl'), progress=False)
  overall = results.extra['label_issues']['overall']
  assert overall['precision'] >= 0.6 and overall['recall'] >= 0.7, overall
  dropped = results.extra['confident_learning']['dropped_examples']
  assert dropped == overall['flagged'] > 0
  trained = sum(len(r['clients']) for r in results.rounds)
  assert trained > 0 and all(np.isfinite(r['train_loss']) for r in results.rounds)
