"""LogitClip: the clipping and its loss (NumPy and TF twins, a hand-computed case), its
parameters, and a digits run that trains otherwise than FedAvg, equal on tff and tf."""
import helpers
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.ops import baseline_losses
from tff_noisy.ops import baseline_losses_tf

_RNG = np.random.default_rng(3)
_LOGITS = _RNG.normal(scale=2.0, size=(8, 5))
_LOGITS[0] *= 0.05  # Inside the ball of radius 1: left as it is.
_LABELS = _RNG.integers(0, 5, 8)


@pytest.mark.parametrize('tau, p', [(1.0, 2.0), (0.5, 1.0), (3.0, 3.0)])
def test_the_tf_twin_equals_numpy(tau, p):
  want = baseline_losses.logit_clip_cross_entropy(_LABELS, _LOGITS, tau, p)
  got = baseline_losses_tf.logit_clip_cross_entropy(
      tf.constant(_LABELS), tf.constant(_LOGITS, tf.float32), tau, p)
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
  clipped = baseline_losses.clip_logits(_LOGITS, tau, p)
  norms = np.sum(np.abs(clipped) ** p, axis=-1) ** (1 / p)
  assert np.all(norms <= tau + 1e-9)
  np.testing.assert_allclose(
      baseline_losses_tf.clip_logits(tf.constant(_LOGITS, tf.float32), tau, p).numpy(),
      clipped, rtol=1e-5, atol=1e-6)


def test_a_hand_computed_case():
  """z = (3, 4): ||z||_2 = 5 > 1, so z' = (0.6, 0.8) and CE(y=1) = log(1 + e^-0.2);
  z = (0.3, 0.4) is inside the ball and keeps its cross-entropy log(1 + e^-0.1)."""
  logits = np.array([[3.0, 4.0], [0.3, 0.4]])
  np.testing.assert_allclose(baseline_losses.clip_logits(logits, 1.0),
                             [[0.6, 0.8], [0.3, 0.4]])
  np.testing.assert_allclose(baseline_losses.logit_clip_cross_entropy([1, 1], logits, 1.0),
                             np.log1p(np.exp([-0.2, -0.1])))
  # The 1-norm of (3, 4) is 7: tau = 3.5 halves it.
  np.testing.assert_allclose(baseline_losses.clip_logits(logits[:1], 3.5, 1.0), [[1.5, 2.0]])


def test_the_gradient_is_finite_at_zero_logits():
  logits = tf.Variable(tf.zeros([2, 3]))
  with tf.GradientTape() as tape:
    loss = baseline_losses_tf.logit_clip_cross_entropy(tf.constant([0, 2]), logits, 1.0)
  assert np.isfinite(tape.gradient(loss, logits).numpy()).all()


@pytest.mark.parametrize('params, match', [
    ({'tau': 0}, r'^method.params.tau: needs a number > 0, got 0$'),
    ({'p': 0.5}, r'^method.params.p: needs a number >= 1, got 0.5$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('logitclip', params, rounds=10)


def _digits(method, runtime, **params):
  return helpers.small_digits_config(method, runtime, params)


@pytest.mark.slow
def test_a_digits_run_clips_equally_on_tff_and_tf_and_is_not_fedavg():
  runs = {runtime: helpers.run_rounds(_digits('logitclip', runtime)) for runtime in ('tff', 'tf')}
  fedavg = helpers.run_rounds(_digits('fedavg', 'tf'))
  for want, got in zip(runs['tff'].final_weights(), runs['tf'].final_weights()):
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
  assert [r['test_accuracy'] for r in runs['tff'].history] == pytest.approx(
      [r['test_accuracy'] for r in runs['tf'].history], abs=1e-6)
  assert max(np.abs(w - f).max() for w, f in zip(runs['tf'].final_weights(),
                                                  fedavg.final_weights())) > 1e-3
  # Over 10 classes, cross-entropy on logits of 2-norm <= 1 is at least 1.4199 (at
  # z_y = 0.949, the others -0.105): the clipped loss cannot approach 0 as FedAvg's can.
  assert all(r['train_loss'] > 1.4198 for r in runs['tf'].history)
