"""Ditto (Li et al. 2021, Algorithm 1): the personal step's proximal gradient and update by
hand, FedEFC's code's variant by hand and by autodiff, the personalised accuracy as the
authors' code pools it, and the TensorFlow twins against NumPy."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import ditto
from tff_noisy.ops import ditto_tf

PERSONAL = [np.array([1.0, 3.0]), np.array(-2.0)]
GLOBAL = [np.array([0.0, 1.0]), np.array(0.0)]


def test_proximal_gradient_and_personal_step_by_hand():
  # λ(v - w), λ = 0.5: (0.5, 1.0) and -1.0.
  got = ditto.proximal_gradient(PERSONAL, GLOBAL, 0.5)
  np.testing.assert_allclose(got[0], [0.5, 1.0])
  np.testing.assert_allclose(got[1], -1.0)
  # v - η(∇F + λ(v - w)), η = 0.1, ∇F = (0.2, -0.4), 0: (1 - 0.07, 3 - 0.06), -2 + 0.1.
  got = ditto.personal_step(PERSONAL, [np.array([0.2, -0.4]), np.array(0.0)], GLOBAL, 0.5, 0.1)
  np.testing.assert_allclose(got[0], [0.93, 2.94])
  np.testing.assert_allclose(got[1], -1.9)
  with pytest.raises(ValueError, match='lambda >= 0'):
    ditto.proximal_gradient(PERSONAL, GLOBAL, -1.0)


def test_personal_step_reaches_the_regularised_minimiser():
  # F(v) = ½||v - a||²: min of F + (λ/2)||v - w||² is (a + λw)/(1 + λ) = (1, 0) for
  # a = (2, -1), w = (0, 1), λ = 1. With η = 0.5 the step's factor 1 - η(1 + λ) is 0: from
  # v = (5, 5), ∇F = (3, 6), λ(v - w) = (5, 4), v - 0.5·(8, 10) = (1, 0) in one step.
  a, w = np.array([2.0, -1.0]), [np.array([0.0, 1.0])]
  v = [np.array([5.0, 5.0])]
  v = ditto.personal_step(v, [v[0] - a], w, 1.0, 0.5)
  np.testing.assert_allclose(v[0], [1.0, 0.0])
  v = ditto.personal_step(v, [v[0] - a], w, 1.0, 0.5)
  np.testing.assert_allclose(v[0], [1.0, 0.0])


def test_fedefc_code_variant_doubles_lambda():
  # 2λ(θ - w), λ = 0.1: 0.2·(1, 2) = (0.2, 0.4) and 0.2·(-2) = -0.4.
  got = ditto.fedefc_proximal_gradient(PERSONAL, GLOBAL)
  np.testing.assert_allclose(got[0], [0.2, 0.4])
  np.testing.assert_allclose(got[1], -0.4)
  # The gradient of the code's λ Σ ||θ - w||² (squared norms, no 1/2).
  variables = [tf.Variable(a) for a in PERSONAL]
  with tf.GradientTape() as tape:
    term = 0.1 * tf.add_n([tf.reduce_sum(tf.square(v - w)) for v, w in zip(variables, GLOBAL)])
  for want, grad in zip(got, tape.gradient(term, variables)):
    np.testing.assert_allclose(grad, want, rtol=1e-12)


def test_personalized_accuracy_pools_the_clients_test_examples():
  # Clients with 3/4, 8/10 and 0/6 correct: pooled 11/20 = 0.55 (not the clients' mean
  # (0.75 + 0.8 + 0)/3 = 0.5167); over the first two (benign) 11/14.
  correct, tested = [3, 8, 0], [4, 10, 6]
  assert ditto.personalized_accuracy(correct, tested) == pytest.approx(0.55)
  assert ditto.personalized_accuracy(correct, tested, clients=[0, 1]) == pytest.approx(11 / 14)
  # Each client once: (0.75 + 0.8 + 0)/3 = 0.51667; over the first two 0.775.
  assert ditto.client_mean_accuracy(correct, tested) == pytest.approx(1.55 / 3)
  assert ditto.client_mean_accuracy(correct, tested, clients=[0, 1]) == pytest.approx(0.775)
  # Variance of 0.75 and 0.8: mean 0.775, ((0.025)² + (0.025)²)/2 = 0.000625.
  assert ditto.accuracy_variance(correct, tested, clients=[0, 1]) == pytest.approx(0.000625)
  with pytest.raises(ValueError, match='no test examples'):
    ditto.personalized_accuracy([0, 1], [0, 2], clients=[0])


def test_the_tensorflow_twins_equal_numpy():
  rng = np.random.default_rng(0)
  shapes = ((3, 2), (2,))
  v, w, g = ([rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(3))
  pairs = [(ditto.proximal_gradient(v, w, 0.7), ditto_tf.proximal_gradient(
               [tf.constant(a) for a in v], w, 0.7)),
           (ditto.personal_step(v, g, w, 0.7, 0.05), ditto_tf.personal_step(
               [tf.constant(a) for a in v], g, w, 0.7, 0.05)),
           (ditto.fedefc_proximal_gradient(v, w), ditto_tf.fedefc_proximal_gradient(
               [tf.constant(a) for a in v], w))]
  for want_list, got_list in pairs:
    for want, got in zip(want_list, got_list):
      np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
