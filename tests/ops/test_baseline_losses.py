"""The baselines' losses against direct formulas written here; TF twins equal NumPy."""
import numpy as np
import pytest
import scipy.optimize
import tensorflow as tf

from tff_noisy.ops import baseline_losses as np_losses
from tff_noisy.ops import baseline_losses_tf as tf_losses

_RNG = np.random.default_rng(0)
_LOGITS = _RNG.normal(scale=3.0, size=(6, 5))
_LABELS = _RNG.integers(0, 5, 6)


def _softmax(logits):
  e = np.exp(logits - logits.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _p_y(logits, labels):
  return _softmax(logits)[np.arange(len(labels)), labels]


def _tempered_softmax_by_bisection(activations, t):
  """p_k = exp_t(a_k - lam) with lam solving sum_k p_k = 1 (Amid et al. Eq. 12)."""
  exp_t = lambda u: np.maximum(1 + (1 - t) * u, 0) ** (1 / (1 - t))  # pylint: disable=unnecessary-lambda-assignment
  rows = []
  for a in activations:
    lam = scipy.optimize.brentq(lambda l, a=a: exp_t(a - l).sum() - 1, a.max() - 50, a.max() + 50,
                                xtol=1e-14)
    rows.append(exp_t(a - lam))
  return np.array(rows)


def _bi_tempered_direct(labels, logits, t1, t2, smoothing=0.0):
  """Eq. 6: sum_k y_k (log_t1 y_k - log_t1 p_k) - (y_k^(2-t1) - p_k^(2-t1)) / (2 - t1)."""
  c = logits.shape[-1]
  p = _softmax(logits) if t2 == 1 else _tempered_softmax_by_bisection(logits, t2)
  y = np.eye(c)[labels]
  if smoothing:
    y = (1 - c / (c - 1) * smoothing) * y + smoothing / (c - 1)
  log_t = (lambda u: np.log(u)) if t1 == 1 else (lambda u: (u ** (1 - t1) - 1) / (1 - t1))
  return np.sum(y * (log_t(y + 1e-10) - log_t(p)) - (y ** (2 - t1) - p ** (2 - t1)) / (2 - t1),
                axis=-1)


@pytest.mark.parametrize('smoothing', [0.0, 0.1, 0.3])
def test_label_smoothing_is_cross_entropy_against_smoothed_targets(smoothing):
  targets = (1 - smoothing) * np.eye(5)[_LABELS] + smoothing / 5
  direct = -np.sum(targets * np.log(_softmax(_LOGITS)), axis=-1)
  np.testing.assert_allclose(
      np_losses.label_smoothing_cross_entropy(_LABELS, _LOGITS, smoothing), direct, rtol=1e-10)


@pytest.mark.parametrize('t1, t2, smoothing', [(1.0, 1.0, 0.0), (0.8, 1.2, 0.0),
                                               (0.5, 2.0, 0.0), (0.8, 1.2, 0.1)])
def test_bi_tempered_loss_matches_the_paper_s_definition(t1, t2, smoothing):
  got = np_losses.bi_tempered_logistic_loss(_LABELS, _LOGITS, t1, t2, smoothing, num_iters=30)
  np.testing.assert_allclose(got, _bi_tempered_direct(_LABELS, _LOGITS, t1, t2, smoothing),
                             rtol=1e-6, atol=1e-8)
  if t2 > 1:  # The tempered softmax is a distribution; 5 fixed-point steps come close.
    p = np.exp(np_losses.tempered_log_softmax(_LOGITS, t2, num_iters=30))
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-9)


def test_bi_tempered_at_one_one_is_cross_entropy():
  np.testing.assert_allclose(np_losses.bi_tempered_logistic_loss(_LABELS, _LOGITS, 1.0, 1.0),
                             -np.log(_p_y(_LOGITS, _LABELS)), rtol=1e-8)


@pytest.mark.parametrize('alpha, beta', [(0.1, 1.0), (1.0, 0.5), (0.0, 1.0)])
def test_symmetric_cross_entropy_is_ce_plus_reverse_ce_with_log_zero_a(alpha, beta):
  p = _softmax(_LOGITS)
  log_onehot = np.where(np.eye(5)[_LABELS] == 1, 0.0, -4.0)  # log 0 := A = -4.
  direct = alpha * -np.log(_p_y(_LOGITS, _LABELS)) + beta * -np.sum(p * log_onehot, axis=-1)
  np.testing.assert_allclose(np_losses.symmetric_cross_entropy(_LABELS, _LOGITS, alpha, beta),
                             direct, rtol=1e-10)


@pytest.mark.parametrize('q', [0.1, 0.7, 1.0])
def test_generalized_cross_entropy(q):
  np.testing.assert_allclose(np_losses.generalized_cross_entropy(_LABELS, _LOGITS, q),
                             (1 - _p_y(_LOGITS, _LABELS) ** q) / q, rtol=1e-10)


_CASES = [
    ('label_smoothing_cross_entropy', {'smoothing': 0.1}),
    ('bi_tempered_logistic_loss', {'t1': 1.0, 't2': 1.0}),
    ('bi_tempered_logistic_loss', {'t1': 0.8, 't2': 1.2}),
    ('bi_tempered_logistic_loss', {'t1': 0.5, 't2': 2.0, 'smoothing': 0.1}),
    ('symmetric_cross_entropy', {'alpha': 0.1, 'beta': 1.0}),
    ('generalized_cross_entropy', {'q': 0.7}),
]


@pytest.mark.parametrize('name, params', _CASES)
def test_tf_twin_equals_numpy_and_its_gradient_is_finite_at_extreme_logits(name, params):
  got = getattr(tf_losses, name)(tf.constant(_LABELS), tf.constant(_LOGITS, tf.float32),
                                 **params).numpy()
  np.testing.assert_allclose(got, getattr(np_losses, name)(_LABELS, _LOGITS, **params),
                             rtol=1e-5, atol=1e-5)
  extreme = tf.Variable([[100.0, -100.0, 0.0], [-100.0, 100.0, -100.0]])
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(getattr(tf_losses, name)(tf.constant([1, 0]), extreme, **params))
  assert np.isfinite(loss.numpy())
  assert np.all(np.isfinite(tape.gradient(loss, extreme).numpy()))
