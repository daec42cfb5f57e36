"""FedDyn (Acar et al. 2021, Algorithm 1): the client's terms and state, the server's state
and model by hand, FedEFC's code's variant by hand, and the TensorFlow twins against
NumPy and against autodiff of the penalty."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import feddyn
from tff_noisy.ops import feddyn_tf

# Two variables: a vector and a scalar.
THETA = [np.array([1.0, 2.0]), np.array(3.0)]
RECEIVED = [np.array([0.0, 4.0]), np.array(1.0)]
STATE = [np.array([0.5, -1.0]), np.array(0.0)]


def test_client_terms_by_hand():
  # -g + α(θ - θ^{t-1}), α = 0.1: (-0.5 + 0.1·1, 1 + 0.1·(-2)) = (-0.4, 0.8); 0 + 0.1·2 = 0.2.
  got = feddyn.gradient_terms(THETA, RECEIVED, STATE, 0.1)
  np.testing.assert_allclose(got[0], [-0.4, 0.8])
  np.testing.assert_allclose(got[1], 0.2)
  # -<g, θ> + (α/2)||θ - θ^{t-1}||² = -(0.5 - 2) + 0.05·(1 + 4 + 4) = 1.5 + 0.45 = 1.95.
  assert feddyn.penalty(THETA, RECEIVED, STATE, 0.1) == pytest.approx(1.95)


def test_client_state_update_by_hand():
  # g - α(θ_k - θ^{t-1}), α = 0.1: (0.5 - 0.1, -1 + 0.2) = (0.4, -0.8); 0 - 0.1·2 = -0.2.
  got = feddyn.client_state_update(STATE, RECEIVED, THETA, 0.1)
  np.testing.assert_allclose(got[0], [0.4, -0.8])
  np.testing.assert_allclose(got[1], -0.2)
  with pytest.raises(ValueError, match='alpha >= 0'):
    feddyn.client_state_update(STATE, RECEIVED, THETA, -0.1)


def test_server_state_and_model_by_hand():
  # m = 4 clients, two took part: θ^{t-1} = 1, θ_1 = 2, θ_2 = 4, h^{t-1} = 0.3, α = 0.5.
  # h^t = 0.3 - (0.5/4)·((2 - 1) + (4 - 1)) = 0.3 - 0.5 = -0.2;
  # θ^t = (2 + 4)/2 - (-0.2)/0.5 = 3 + 0.4 = 3.4.
  h = feddyn.server_state_update([np.array([0.3])], [np.array([1.0])],
                                 [[np.array([2.0])], [np.array([4.0])]], 0.5, 4)
  np.testing.assert_allclose(h[0], [-0.2])
  model = feddyn.server_model([[np.array([2.0])], [np.array([4.0])]], h, 0.5)
  np.testing.assert_allclose(model[0], [3.4])
  with pytest.raises(ValueError, match='for m = 1 clients'):
    feddyn.server_state_update(h, [np.array([1.0])], [[np.array([2.0])]] * 2, 0.5, 1)


def test_server_state_is_the_mean_of_all_clients_gradient_states():
  # g_k and h start at 0 and change by -α(θ_k - θ^{t-1}) and -(α/m)·the same sum, so
  # h = (1/m) Σ_all g_k after any rounds, whichever clients took part.
  rng = np.random.default_rng(0)
  alpha, m = 0.3, 3
  g = [[np.zeros(2)] for _ in range(m)]
  h = [np.zeros(2)]
  received = [rng.normal(size=2)]
  for part in ([0, 2], [1], [0, 1, 2]):
    trained = {k: [received[0] + rng.normal(size=2)] for k in part}
    for k in part:
      g[k] = feddyn.client_state_update(g[k], received, trained[k], alpha)
    h = feddyn.server_state_update(h, received, [trained[k] for k in part], alpha, m)
    received = feddyn.server_model([trained[k] for k in part], h, alpha)
    np.testing.assert_allclose(h[0], np.mean([gk[0] for gk in g], axis=0), atol=1e-12)


def test_the_aggregate_forms_equal_the_per_client_forms():
  rng = np.random.default_rng(2)
  received = [rng.normal(size=(2, 2)), rng.normal(size=3)]
  trained = [[r + rng.normal(size=r.shape) for r in received] for _ in range(3)]
  h = [rng.normal(size=r.shape) for r in received]
  mean_update = [np.mean([t[i] - received[i] for t in trained], axis=0) for i in range(2)]
  model, new_h = feddyn.server_step(received, mean_update, 3, h, 0.2, 10)
  want_h = feddyn.server_state_update(h, received, trained, 0.2, 10)
  want_model = feddyn.server_model(trained, want_h, 0.2)
  for got, want in zip(model + new_h, want_model + want_h):
    np.testing.assert_allclose(got, want, atol=1e-12)
  controls = [[rng.normal(size=r.shape) for r in received] for _ in range(3)]
  control_sum = [sum(c[i] for c in controls) for i in range(2)]
  for got, want in zip(feddyn.fedefc_server_step(received, mean_update, control_sum, 0.3),
                       feddyn.fedefc_server_model(trained, controls, 0.3)):
    np.testing.assert_allclose(got, want, atol=1e-12)
  with pytest.raises(ValueError, match='4 clients took part out of m = 3'):
    feddyn.server_step(received, mean_update, 4, h, 0.2, 3)


def test_fedefc_code_variant_by_hand():
  # θ^{t-1} = 1; client 1 trained to 2 with c_1 = 0.5 before, client 2 to 4 with c_2 = 0.
  # c_k += θ^{t-1} - θ_k: c_1 = 0.5 - 1 = -0.5, c_2 = -3.
  # θ^t = (2 + 4)/2 - μ(-0.5 - 3) = 3 + 3.5 μ = 3.35 for μ = 0.1.
  c1 = feddyn.client_state_update([np.array([0.5])], [np.array([1.0])], [np.array([2.0])], 1.0)
  c2 = feddyn.client_state_update([np.array([0.0])], [np.array([1.0])], [np.array([4.0])], 1.0)
  np.testing.assert_allclose([c1[0], c2[0]], [[-0.5], [-3.0]])
  model = feddyn.fedefc_server_model([[np.array([2.0])], [np.array([4.0])]], [c1, c2], 0.1)
  np.testing.assert_allclose(model[0], [3.35])
  # Its default μ = 1e-5 (the code's --mu) leaves the plain mean nearly unchanged.
  model = feddyn.fedefc_server_model([[np.array([2.0])], [np.array([4.0])]], [c1, c2])
  np.testing.assert_allclose(model[0], [3.0 + 3.5e-5])


def test_the_tensorflow_twins_equal_numpy_and_autodiff():
  rng = np.random.default_rng(1)
  shapes = ((3, 2), (2,))
  w, r, g, t = ([rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(4))
  for want, got in zip(feddyn.gradient_terms(w, r, g, 0.05),
                       feddyn_tf.gradient_terms([tf.constant(a) for a in w], r, g, 0.05)):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
  for want, got in zip(feddyn.client_state_update(g, r, t, 0.05),
                       feddyn_tf.client_state_update(g, r, [tf.constant(a) for a in t], 0.05)):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
  variables = [tf.Variable(a) for a in w]
  with tf.GradientTape() as tape:
    value = feddyn_tf.penalty(variables, r, g, 0.05)
  assert float(value) == pytest.approx(feddyn.penalty(w, r, g, 0.05), rel=1e-5)
  for want, got in zip(feddyn.gradient_terms(w, r, g, 0.05), tape.gradient(value, variables)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
