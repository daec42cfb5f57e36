"""Co-teaching (Han et al. 2018, Algorithm 1): the small-loss cross-update (NumPy and TF
twins, hand-computed cases), the forget-rate schedule, the two-network model, the
parameters, and digits runs (equal on tff and tf, not FedAvg)."""
import helpers
import numpy as np
import pytest
import tensorflow as tf

import models
from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.methods.two_networks import two_networks
from tff_noisy.ops import coteaching
from tff_noisy.ops import coteaching_tf

_RNG = np.random.default_rng(0)


@pytest.mark.parametrize('batch, rate', [(10, 0.0), (10, 0.2), (10, 0.6), (7, 0.5), (1, 0.2)])
def test_the_tf_twin_equals_numpy(batch, rate):
  labels = _RNG.integers(0, 4, batch)
  logits_f, logits_g = (_RNG.normal(scale=2.0, size=(batch, 4)) for _ in range(2))
  want = coteaching.cross_update_loss(labels, logits_f, logits_g, rate)
  got = coteaching_tf.cross_update_loss(tf.constant(labels), tf.constant(logits_f, tf.float32),
                                        tf.constant(logits_g, tf.float32), tf.constant(rate))
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_a_hand_computed_cross_update():
  """Two classes, label 0: CE = log(1 + e^{z_1 - z_0}). f's losses rank examples 1, 3 the
  smallest, g's 0, 2; with τ = 0.5 each keeps n = 2 of B = 4, so ℓ = 2·(CE_f on {0, 2}) +
  2·(CE_g on {1, 3}) and the batch mean is the two updates' mean losses summed."""
  labels = np.zeros(4, np.int64)
  f = np.array([[0.0, 1.0], [0.0, -2.0], [0.0, 2.0], [0.0, -1.0]])
  g = np.array([[0.0, -3.0], [0.0, 0.5], [0.0, -0.5], [0.0, 3.0]])
  ce_f, ce_g = np.log1p(np.exp(f[:, 1])), np.log1p(np.exp(g[:, 1]))
  loss = coteaching.cross_update_loss(labels, f, g, 0.5)
  np.testing.assert_allclose(loss, [2 * ce_f[0], 2 * ce_g[1], 2 * ce_f[2], 2 * ce_g[3]])
  assert loss.mean() == pytest.approx(ce_f[[0, 2]].mean() + ce_g[[1, 3]].mean())
  # τ = 0: every example kept by both, the two networks' cross-entropies summed.
  np.testing.assert_allclose(coteaching.cross_update_loss(labels, f, g, 0.0), ce_f + ce_g)


def test_each_network_learns_only_from_the_examples_its_peer_kept():
  labels = tf.constant([0, 1, 2, 0, 1, 2])
  logits_f = tf.Variable(_RNG.normal(size=(6, 3)).astype(np.float32))
  logits_g = tf.Variable(_RNG.normal(size=(6, 3)).astype(np.float32))
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(coteaching_tf.cross_update_loss(labels, logits_f, logits_g,
                                                          tf.constant(0.5)))
  grad_f, grad_g = tape.gradient(loss, [logits_f, logits_g])
  ce_f, ce_g = (coteaching.cross_entropy(labels.numpy(), v.numpy()) for v in (logits_f, logits_g))
  kept_f, kept_g = (coteaching.small_loss_mask(ce, 3) for ce in (ce_f, ce_g))
  np.testing.assert_array_equal(np.abs(grad_f.numpy()).sum(axis=1) > 0, kept_g)
  np.testing.assert_array_equal(np.abs(grad_g.numpy()).sum(axis=1) > 0, kept_f)


def test_the_forget_rate_schedule_and_the_kept_count():
  """linspace(0, τ^c, T_k) over rounds 1..T_k, then τ (the authors' rate_schedule)."""
  assert [coteaching.forget_rate(t, 0.2, 5) for t in (1, 2, 5, 6, 50)] == pytest.approx(
      [0.0, 0.05, 0.2, 0.2, 0.2])
  assert coteaching.forget_rate(3, 0.2, 3, exponent=2) == pytest.approx(0.04)
  assert coteaching.forget_rate(4, 0.2, 3, exponent=2) == pytest.approx(0.2)
  assert [coteaching.num_remembered(b, r) for b, r in ((10, 0.2), (16, 0.2), (3, 0.5),
                                                       (1, 0.2))] == [8, 12, 1, 1]
  # (1 - 0.6)·10 is 3.9999998 in float32, as the clients compute it (4.0 in float64).
  assert coteaching.num_remembered(10, 0.6) == 3


def test_the_two_network_model_holds_two_independent_copies():
  build = two_networks(lambda: models.build_model('mlp', (8, 8, 1), 10, width=16))
  model = build()
  single = models.build_model('mlp', (8, 8, 1), 10, width=16)
  assert len(model.trainable_variables) == 2 * len(single.trainable_variables)
  x = _RNG.normal(size=(5, 8, 8, 1)).astype(np.float32)
  features, logits = models.features_and_logits(model)(x)
  assert features.shape == (5, 20) and logits.shape == (5, 10)
  np.testing.assert_array_equal(logits.numpy(), features.numpy()[:, :10])
  assert np.abs(features.numpy()[:, :10] - features.numpy()[:, 10:]).max() > 1e-3


@pytest.mark.parametrize('params, match', [
    ({'forget_rate': 1.0}, r'^method.params.forget_rate: needs a number in \[0, 1\), got 1.0$'),
    ({'gradual_rounds': 11}, r'^method.params.gradual_rounds: needs a round within '
                             r'fl.rounds=10, got 11$'),
    ({'exponent': 0}, r'^method.params.exponent: needs a number > 0, got 0$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('coteaching', params, rounds=10)


def _digits(method, runtime='tf', **params):
  return helpers.small_digits_config(method, runtime, params)


@pytest.mark.slow
def test_coteaching_runs_equally_on_tff_and_tf_and_is_not_fedavg():
  runs = {runtime: helpers.run_rounds(_digits('coteaching', runtime, gradual_rounds=2))
          for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  assert [r['forget_rate'] for r in runs['tf'].history] == pytest.approx([0.0, 0.2])
  assert [r['test_accuracy'] for r in runs['tff'].history] == pytest.approx(
      [r['test_accuracy'] for r in runs['tf'].history], abs=1e-6)
  fedavg = helpers.run_rounds(_digits('fedavg'))
  network_f = runs['tf'].final_weights()[:len(fedavg.final_weights())]
  assert helpers.max_difference(network_f, fedavg.final_weights()) > 1e-3
