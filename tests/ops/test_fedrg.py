"""FedRG (Wen et al. 2026, its released code): the vMF concentration, the augmentation
precision and its running median, the geometric responsibilities, P_clean, SCE, the NLL
through T, the loss, T's projection, the mixture's update and SimCLR's InfoNCE by hand;
the TensorFlow twins against NumPy (the GMM split against ``dividemix.clean_probability_em``)."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import dividemix
from tff_noisy.ops import fedrg
from tff_noisy.ops import fedrg_tf

_E = np.e


def test_a_inverse_by_hand():
  # R = 1/2, d = 3: (1/2)(3 - 1/4) / (1 - 1/4) = (11/8) / (3/4) = 11/6.
  assert fedrg.a_inverse(0.5, 3) == pytest.approx(11 / 6)
  # R = 0 is clipped to 1e-6: ≈ 1e-6 · d.
  assert fedrg.a_inverse(0.0, 4) == pytest.approx(4e-6, rel=1e-6)
  # R = 1 is clipped to 1 - 1e-6: finite, about d / (2e-6).
  assert 1e5 < fedrg.a_inverse(1.0, 2) < np.inf


def test_augmentation_concentration_by_hand():
  # z₁ = (1, 0), z₂ = (0, 1): ‖(z₁ + z₂)/2‖ = √½; A⁻¹ = √½ (2 − ½) / ½ = 3 √½.
  got = fedrg.augmentation_concentration([[1.0, 0.0]], [[0.0, 1.0]])
  np.testing.assert_allclose(got, [3 * np.sqrt(0.5)])


def test_the_running_median_starts_at_the_lower_median():
  # [3, 1, 4, 2] sorted: 1, 2, 3, 4; torch.median takes the lower middle, 2.
  assert fedrg.lower_median([3, 1, 4, 2]) == 2
  assert fedrg.update_median(10.0, False, [3, 1, 4, 2]) == 2
  # Then m ← 0.9 · 10 + 0.1 · 2 = 9.2.
  assert fedrg.update_median(10.0, True, [3, 1, 4, 2]) == pytest.approx(9.2)


def test_precision_ratio_is_clipped_to_its_range():
  # κ̂ / 4 = (0.1, 0.25, 1, 25) → clipped to [0.2, 2].
  np.testing.assert_allclose(fedrg.precision_ratio([0.4, 1.0, 4.0, 100.0], 4.0),
                             [0.2, 0.25, 1.0, 2.0], rtol=1e-7)


def test_geometry_posterior_by_hand():
  # z = (1, 0), μ = I, κ = (2, 2), β = (½, ½), π₀ = ½: the logits over 2 are
  # (log ½, 2 + log ½, log ½) / 2, so the posterior ∝ (1, e, 1).
  z, mu = np.array([[1.0, 0.0]]), np.eye(2)
  bg, gamma = fedrg.geometry_posterior(z, mu, [2.0, 2.0], [0.5, 0.5], 0.5)
  np.testing.assert_allclose(bg, [1 / (2 + _E)], rtol=1e-9)
  np.testing.assert_allclose(gamma, [[_E / (2 + _E), 1 / (2 + _E)]], rtol=1e-9)
  # r = ½ halves κ z·μ: ∝ (1, e^½, 1).
  bg, gamma = fedrg.geometry_posterior(z, mu, [2.0, 2.0], [0.5, 0.5], 0.5, ratio=[0.5])
  root = np.sqrt(_E)
  np.testing.assert_allclose(gamma, [[root / (2 + root), 1 / (2 + root)]], rtol=1e-9)


def test_clean_posterior_by_hand():
  # γ = (0.6, 0.2), γ_bg = 0.2, M = [[¾, ¼], [½, ½]]. Label 0: q = 0.45 + 0.05 = 0.5,
  # the rest 0.15 + 0.15 = 0.3, denominator 1: 0.5. Label 1: q = 0.3 + 0.1 = 0.4.
  gamma, bg = np.array([[0.6, 0.2], [0.6, 0.2]]), np.array([0.2, 0.2])
  m_map = np.array([[0.75, 0.25], [0.5, 0.5]])
  np.testing.assert_allclose(fedrg.clean_posterior(gamma, bg, m_map, [0, 1]), [0.5, 0.4])


def test_symmetric_ce_is_the_codes_sce():
  # Logits 0, 2 classes: p_y = ½. CE = log 2, RCE = −log(1e-4) · (1 − ½).
  got = fedrg.symmetric_ce([0], [[0.0, 0.0]])
  assert got[0] == pytest.approx(0.1 * np.log(2) + 0.5 * np.log(1e4))


def test_absorbed_nll_by_hand():
  # softmax = (0.8, 0.2), T = [[0.9, 0.1], [0.3, 0.7]]: p T = (0.78, 0.22); label 1.
  logits = np.log([[0.8, 0.2]])
  transition = np.array([[0.9, 0.1], [0.3, 0.7]])
  assert fedrg.absorbed_nll([1], logits, transition)[0] == pytest.approx(-np.log(0.22))


def test_fedrg_loss_means_to_the_codes_batch_loss():
  # Two examples, the second noisy: mean ℓ = 0.4 mean SCE + 1 · NLL_T of the second.
  logits = np.array([[1.0, 0.0], [0.0, 2.0]])
  labels = [0, 0]
  transition = np.array([[0.9, 0.1], [0.3, 0.7]])
  loss = fedrg.fedrg_loss(labels, logits, transition, [0.0, 1.0])
  sce = fedrg.symmetric_ce(labels, logits)
  nll = fedrg.absorbed_nll(labels, logits, transition)
  assert loss[0] == pytest.approx(0.4 * sce[0])
  assert loss.mean() == pytest.approx(0.4 * sce.mean() + nll[1] / (1 + 1e-8))
  # No noisy example: the SCE term alone.
  np.testing.assert_allclose(fedrg.fedrg_loss(labels, logits, transition, [0.0, 0.0]),
                             0.4 * sce)


def test_project_transition_by_hand():
  # [[2, −1], [1, 1]]: −1 → 1e-6, rows divided by 2 + 1e-6 and by 2.
  got = fedrg.project_transition([[2.0, -1.0], [1.0, 1.0]])
  np.testing.assert_allclose(got, [[2 / (2 + 1e-6), 1e-6 / (2 + 1e-6)], [0.5, 0.5]])


_MIXTURE = {'mu': np.eye(2), 'kappa': np.array([5.0, 5.0]), 'beta': np.array([0.5, 0.5]),
            'pi0': 0.05, 'm': np.full((2, 2), 0.5)}


def test_update_mixture_by_hand():
  """Two examples z = (1, 0), (0, 1) both on component 0 (γ = (½, 0) each, γ_bg = ½),
  labels 0 and 1, the first clean; η = 0.1, α = 5, α_M = ½."""
  z = np.eye(2)
  gamma, bg = np.array([[0.5, 0.0], [0.5, 0.0]]), np.array([0.5, 0.5])
  got = fedrg.update_mixture(_MIXTURE, z, gamma, bg, [0, 1], [1.0, 0.0])
  # S₀ = (½, ½), n₀ = 1; S₁ = 0, n₁ = 0; n_bg = 1.
  # μ₀ = l2n(0.9 (1, 0) + 0.1 (√½, √½)) = l2n(0.970711, 0.070711); μ₁ = l2n(0.9 (0, 1)).
  norm = np.hypot(0.9 + 0.1 * np.sqrt(0.5), 0.1 * np.sqrt(0.5))
  np.testing.assert_allclose(got['mu'], [[(0.9 + 0.1 * np.sqrt(0.5)) / norm,
                                          0.1 * np.sqrt(0.5) / norm], [0.0, 1.0]], rtol=1e-6)
  # κ₀: R = √½, A⁻¹ = 3√½ = 2.12132 → 0.9 · 5 + 0.1 · 2.12132; κ₁: R = 0 → clipped to 0.5.
  np.testing.assert_allclose(got['kappa'], [4.5 + 0.3 * np.sqrt(0.5), 4.55], rtol=1e-6)
  # β_new = (n + 5/2) / (1 + 5) = (3.5, 2.5) / 6; β = 0.9 · ½ + 0.1 β_new.
  np.testing.assert_allclose(got['beta'], [0.45 + 0.35 / 6, 0.45 + 0.25 / 6])
  # π₀_new = (1 + 0.5) / (1 + 1 + 0.5) = 0.6; π₀ = 0.045 + 0.06 = 0.105.
  assert got['pi0'] == pytest.approx(0.105)
  # N = [[½, 0], [0, 0]] (only the clean example, label 0): N + ½ = [[1, ½], [½, ½]],
  # rows (⅔, ⅓) and (½, ½); M = 0.9 · ½ + 0.1 · those.
  np.testing.assert_allclose(got['m'], [[0.45 + 0.2 / 3, 0.45 + 0.1 / 3], [0.5, 0.5]])


def test_update_mixture_keeps_m_without_clean_examples_and_clips_pi0():
  z = np.array([[0.6, 0.8]])
  gamma, bg = np.array([[0.05, 0.05]]), np.array([0.9])
  got = fedrg.update_mixture(dict(_MIXTURE, pi0=0.2), z, gamma, bg, [1], [0.0])
  np.testing.assert_allclose(got['m'], _MIXTURE['m'])
  # π₀_new = (0.9 + 0.5) / (0.1 + 0.9 + 0.5) = 14/15; 0.18 + 0.0933 = 0.273 → clipped to 0.2.
  assert got['pi0'] == pytest.approx(0.2)


def test_info_nce_by_hand():
  # x₁ = (1, 0), x₂ = (0, 1) and their views equal, τ = 1: row 0 sees s = (·, 0, 1, 0),
  # its partner is row 2: log(1 + e + 1) − 1; every row alike.
  f = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 3.0]])
  np.testing.assert_allclose(fedrg.info_nce(f, 1.0), np.full(4, np.log(2 + _E) - 1))
  # One example and its view, identical: the partner is the only other row, loss 0.
  np.testing.assert_allclose(fedrg.info_nce([[1.0, 0.0], [1.0, 0.0]], 0.07), [0.0, 0.0],
                             atol=1e-12)


def test_initial_mixture_is_the_codes_start():
  got = fedrg.initial_mixture(3, 2, 4, np.random.default_rng(0))
  np.testing.assert_allclose(np.linalg.norm(got['mu'], axis=1), 1.0, rtol=1e-7)
  np.testing.assert_array_equal(got['kappa'], [5.0, 5.0])
  np.testing.assert_array_equal(got['beta'], [0.5, 0.5])
  assert got['pi0'] == 0.05
  np.testing.assert_allclose(got['m'], np.full((3, 2), 1 / 3))


# The TensorFlow twins against NumPy.

_RNG = np.random.default_rng(3)


def f32(a):
  return tf.constant(np.asarray(a), tf.float32)


def _unit(n, d):
  return fedrg.l2_normalize(_RNG.normal(size=(n, d)))


def test_tf_twins_agree_with_numpy():
  z1, z2, mu = _unit(6, 4), _unit(6, 4), _unit(3, 4)
  kappa, beta = np.array([5.0, 2.0, 9.0]), np.array([0.2, 0.5, 0.3])
  m_map = _RNG.dirichlet(np.ones(3), size=2)
  labels = np.array([0, 1, 1, 0, 1, 0])
  kappa_hat = fedrg.augmentation_concentration(z1, z2)
  np.testing.assert_allclose(fedrg_tf.augmentation_concentration(f32(z1), f32(z2)),
                             kappa_hat, rtol=1e-4)
  assert float(fedrg_tf.update_median(f32(3.0), f32(1.0), f32(kappa_hat))) == pytest.approx(
      fedrg.update_median(3.0, True, kappa_hat), rel=1e-5)
  assert float(fedrg_tf.update_median(f32(3.0), f32(0.0), f32(kappa_hat))) == pytest.approx(
      fedrg.update_median(3.0, False, kappa_hat), rel=1e-5)
  ratio = fedrg.precision_ratio(kappa_hat, 2.0)
  np.testing.assert_allclose(fedrg_tf.precision_ratio(f32(kappa_hat), f32(2.0)), ratio,
                             rtol=1e-5)
  bg, gamma = fedrg.geometry_posterior(z1, mu, kappa, beta, 0.05, ratio)
  tf_bg, tf_gamma = fedrg_tf.geometry_posterior(f32(z1), f32(mu), f32(kappa), f32(beta),
                                                f32(0.05), f32(ratio))
  np.testing.assert_allclose(tf_bg, bg, rtol=1e-4)
  np.testing.assert_allclose(tf_gamma, gamma, rtol=1e-4)
  p_clean = fedrg.clean_posterior(gamma, bg, m_map, labels)
  np.testing.assert_allclose(fedrg_tf.clean_posterior(f32(gamma), f32(bg), f32(m_map), labels),
                             p_clean, rtol=1e-5)
  mixture = {'mu': mu, 'kappa': kappa, 'beta': beta, 'pi0': 0.05, 'm': m_map}
  clean = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
  want = fedrg.update_mixture(mixture, z1, gamma, bg, labels, clean)
  got = fedrg_tf.update_mixture({k: f32(v) for k, v in mixture.items()}, f32(z1), f32(gamma),
                                f32(bg), labels, f32(clean))
  for key in want:
    np.testing.assert_allclose(got[key], want[key], rtol=1e-4, err_msg=key)
  no_clean = fedrg_tf.update_mixture({k: f32(v) for k, v in mixture.items()}, f32(z1),
                                     f32(gamma), f32(bg), labels, f32(np.zeros(6)))
  np.testing.assert_allclose(no_clean['m'], m_map, rtol=1e-6)


def test_tf_losses_agree_with_numpy():
  logits = _RNG.normal(size=(5, 3))
  labels = np.array([0, 2, 1, 1, 0])
  transition = fedrg.project_transition(_RNG.uniform(size=(3, 3)))
  noisy = np.array([0.0, 1.0, 1.0, 0.0, 0.0])
  np.testing.assert_allclose(
      fedrg_tf.fedrg_loss(labels, f32(logits), f32(transition), f32(noisy)),
      fedrg.fedrg_loss(labels, logits, transition, noisy), rtol=1e-5)
  raw = _RNG.normal(size=(3, 3))
  np.testing.assert_allclose(fedrg_tf.project_transition(f32(raw)),
                             fedrg.project_transition(raw), rtol=1e-5)
  projections = _RNG.normal(size=(6, 4))
  np.testing.assert_allclose(fedrg_tf.info_nce(f32(projections), 0.5),
                             fedrg.info_nce(projections, 0.5), rtol=1e-5)


def test_the_loss_reaches_t_through_the_noisy_examples_only():
  """∂/∂T of mean ℓ: zero when no example is noisy; else that of the noisy examples' NLL."""
  logits = tf.constant([[1.0, 0.0], [0.0, 2.0]])
  transition = tf.Variable([[0.9, 0.1], [0.3, 0.7]])
  for noisy, touched in (([0.0, 0.0], False), ([0.0, 1.0], True)):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(fedrg_tf.fedrg_loss([0, 0], logits, transition, tf.constant(noisy)))
    grad = tape.gradient(loss, transition)
    assert (grad is not None and float(tf.reduce_max(tf.abs(grad))) > 0) == touched


def test_the_gmm_split_is_dividemixs_em_on_one_minus_p_clean():
  p_clean = np.concatenate([_RNG.uniform(0.6, 0.9, 10), _RNG.uniform(0.0, 0.2, 6)])
  noisy, probability = fedrg_tf.noisy_split(tf.constant(p_clean, tf.float32), 0.5)
  want = dividemix.clean_probability_em(1.0 - p_clean, max_iter=100, tol=1e-3,
                                        reg_covar=1e-6)
  np.testing.assert_allclose(probability, want, atol=1e-5)
  # The high-P_clean examples are the clean component, the rest noisy.
  np.testing.assert_array_equal(noisy, [0.0] * 10 + [1.0] * 6)
