"""FedLSR (Jiang et al. 2022): the sharpening, the MixUp prediction, the tempered
self-distillation and entropy terms and the ramp γ(t) by hand; the TensorFlow twin
against NumPy, its gradient into both views, and the stateless draw of λ."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import fedlsr
from tff_noisy.ops import fedlsr_tf

# Two classes. z₁ = (0, log 3): softmax (1/4, 3/4); z₂ = (log 3, 0): softmax (3/4, 1/4).
Z1 = np.array([[0.0, np.log(3.0)]])
Z2 = np.array([[np.log(3.0), 0.0]])


def _binary_entropy(p):
  return -(p * np.log(p) + (1 - p) * np.log(1 - p))


def test_sharpen_and_mixed_prediction_by_hand():
  # (1/4, 3/4) squared: (1/16, 9/16), normalised: (1/10, 9/10).
  np.testing.assert_allclose(fedlsr.sharpen([[0.25, 0.75]]), [[0.1, 0.9]])
  # T = 1 leaves p as it is.
  np.testing.assert_allclose(fedlsr.sharpen([[0.25, 0.75]], 1.0), [[0.25, 0.75]])
  # λ = 1/4: (1/4)(1/4, 3/4) + (3/4)(3/4, 1/4) = (10/16, 6/16).
  np.testing.assert_allclose(fedlsr.mixed_prediction(Z1, Z2, 0.25), [[0.625, 0.375]])


def test_tempered_probs_sharpen_by_three_and_clamp():
  # softmax(3 z₁) = (1, 27) / 28.
  np.testing.assert_allclose(fedlsr.tempered_probs(Z1), [[1 / 28, 27 / 28]])
  # softmax(3 (0, 100)) = (e^-300, 1) / (1 + e^-300): the small entry is clamped to 1e-6.
  np.testing.assert_allclose(fedlsr.tempered_probs([[0.0, 100.0]]), [[1e-6, 1.0]])


def test_js_divergence_by_hand():
  # q₁ = (1/28, 27/28), q₂ = (27/28, 1/28): m = (1/2, 1/2) and both KL terms are equal,
  # JS = (1/28) log((1/28)/(1/2)) + (27/28) log((27/28)/(1/2)).
  q1, q2 = np.array([[1 / 28, 27 / 28]]), np.array([[27 / 28, 1 / 28]])
  want = (1 / 28) * np.log(1 / 14) + (27 / 28) * np.log(27 / 14)
  np.testing.assert_allclose(fedlsr.js_divergence(q1, q2), [want])
  np.testing.assert_allclose(fedlsr.js_divergence(q1, q1), [0.0], atol=1e-15)


@pytest.mark.parametrize('variant', fedlsr.VARIANTS)
def test_the_loss_by_hand(variant):
  # λ = 1/4: p = (10/16, 6/16), p_s = (100, 36)/136 = (25/34, 9/34); label 0.
  # q₁ = (1/28, 27/28), q₂ = (27/28, 1/28) (3 z), JS as in test_js_divergence_by_hand.
  js = (1 / 28) * np.log(1 / 14) + (27 / 28) * np.log(27 / 14)
  if variant == 'code':
    # −log softmax(p_s)_0 = log(1 + e^{(9 − 25)/34}); JS / C, C = 2;
    # H(softmax(q₁)): softmax((1, 27)/28) = (1, e^{26/28}) / (1 + e^{26/28}).
    ce = np.log(1 + np.exp(-16 / 34))
    distill = js / 2
    ent = _binary_entropy(1 / (1 + np.exp(26 / 28)))
  else:
    # −log p_s,0 = log(34/25); JS; ½ (H(q₁) + H(q₂)) = H(q₁), the binary entropy of 1/28.
    ce = np.log(34 / 25)
    distill = js
    ent = _binary_entropy(1 / 28)
  terms = fedlsr.loss_terms(Z1, Z2, [0], 0.25, variant=variant)
  np.testing.assert_allclose(terms['ce'], [ce])
  np.testing.assert_allclose(terms['distill'], [distill])
  np.testing.assert_allclose(terms['entropy'], [ent])
  np.testing.assert_allclose(fedlsr.fedlsr_loss(Z1, Z2, [0], 0.25, 0.2, 0.3, variant=variant),
                             [ce + 0.2 * distill + 0.3 * ent])


def test_code_variant_batch_mean_is_the_codes_reductions():
  """The code: mean CE + γ ½ (mean over B·C of q₁ (log q₁ − log m) + the same for q₂)
  + γ_e mean H(softmax(q₁)); the per-example loss's mean must equal it."""
  rng = np.random.default_rng(0)
  z1, z2 = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
  labels = rng.integers(0, 4, 5)
  q1, q2 = fedlsr.tempered_probs(z1), fedlsr.tempered_probs(z2)
  log_m = np.log((q1 + q2) / 2)
  kl_entries = 0.5 * (np.mean(q1 * (np.log(q1) - log_m)) + np.mean(q2 * (np.log(q2) - log_m)))
  p_s = fedlsr.sharpen(fedlsr.mixed_prediction(z1, z2, 0.7))
  ce = np.mean(-np.log(np.exp(p_s[np.arange(5), labels]) / np.exp(p_s).sum(1)))
  s = np.exp(q1) / np.exp(q1).sum(1, keepdims=True)
  ent = np.mean(-np.sum(s * np.log(s), 1))
  want = ce + 0.4 * kl_entries + 0.3 * ent
  got = fedlsr.fedlsr_loss(z1, z2, labels, 0.7, 0.4, 0.3).mean()
  assert got == pytest.approx(want, rel=1e-12)


def test_identical_views_do_not_distil():
  terms = fedlsr.loss_terms(Z1, Z1, [1], 0.5, variant='plain')
  np.testing.assert_allclose(terms['distill'], [0.0], atol=1e-15)
  # p = p_s's base = (1/4, 3/4), sharpened to (1/10, 9/10): −log 0.9.
  np.testing.assert_allclose(terms['ce'], [-np.log(0.9)])


def test_the_warm_up_ramp_by_hand():
  # 120 rounds, ratio 0.2: t_w = 24; round r has t = r − 1.
  t_w = fedlsr.warmup_rounds(120)
  assert t_w == 24.0
  assert fedlsr.distillation_weight(1, 0.4, t_w) == 0.0
  assert fedlsr.distillation_weight(13, 0.4, t_w) == pytest.approx(0.4 * 12 / 24)
  assert fedlsr.distillation_weight(24, 0.4, t_w) == pytest.approx(0.4 * 23 / 24)
  assert fedlsr.distillation_weight(25, 0.4, t_w) == 0.4
  assert fedlsr.distillation_weight(120, 0.4, t_w) == 0.4
  # t_w = 2.5 (10 rounds, ratio 1/4): 0, 0.4/2.5, 0.8/2.5, then 0.4 from t = 3.
  weights = [fedlsr.distillation_weight(r, 0.4, fedlsr.warmup_rounds(10, 0.25))
             for r in range(1, 6)]
  np.testing.assert_allclose(weights, [0.0, 0.16, 0.32, 0.4, 0.4])
  assert fedlsr.distillation_weight(1, 0.4, 0.0) == 0.4
  with pytest.raises(ValueError):
    fedlsr.distillation_weight(0, 0.4, 24.0)
  with pytest.raises(ValueError):
    fedlsr.warmup_rounds(100, 1.5)
  with pytest.raises(ValueError):
    fedlsr.loss_terms(Z1, Z2, [0], 0.5, variant='paper')


@pytest.mark.parametrize('variant', fedlsr.VARIANTS)
@pytest.mark.parametrize('mix', [0.0, 0.37, 1.0])
def test_the_tensorflow_twin_equals_numpy(variant, mix):
  rng = np.random.default_rng(1)
  z1 = rng.normal(scale=3.0, size=(6, 5)).astype(np.float32)
  z2 = rng.normal(scale=3.0, size=(6, 5)).astype(np.float32)
  labels = rng.integers(0, 5, 6)
  got = fedlsr_tf.fedlsr_loss(labels, tf.constant(z1), tf.constant(z2), tf.constant(mix),
                              tf.constant(0.25), 0.3, variant=variant)
  want = fedlsr.fedlsr_loss(z1, z2, labels, mix, 0.25, 0.3, variant=variant)
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
  np.testing.assert_allclose(fedlsr_tf.sharpen(tf.constant([[0.25, 0.75]])), [[0.1, 0.9]],
                             rtol=1e-6)


@pytest.mark.parametrize('variant', fedlsr.VARIANTS)
def test_both_views_get_a_gradient(variant):
  rng = np.random.default_rng(2)
  z1 = tf.Variable(rng.normal(size=(4, 3)).astype(np.float32))
  z2 = tf.Variable(rng.normal(size=(4, 3)).astype(np.float32))
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(fedlsr_tf.fedlsr_loss([0, 1, 2, 0], z1, z2, 0.5, 0.4, 0.3,
                                                variant=variant))
  g1, g2 = tape.gradient(loss, [z1, z2])
  assert np.abs(g1.numpy()).sum() > 1e-4 and np.abs(g2.numpy()).sum() > 1e-4


def test_the_tensorflow_ramp_equals_numpy():
  for r in (1, 7, 24, 25, 60):
    assert float(fedlsr_tf.distillation_weight(tf.constant(r), 0.4, 24.0)) == pytest.approx(
        fedlsr.distillation_weight(r, 0.4, 24.0), abs=1e-7)
  assert float(fedlsr_tf.distillation_weight(tf.constant(1), 0.4, 0.0)) == pytest.approx(0.4)


def test_mix_draws_are_uniform_and_fixed_by_the_seed():
  draws = np.array([float(fedlsr_tf.draw_mix(tf.constant([3, i]))) for i in range(500)])
  # Beta(1, 1) = U(0, 1): mean 1/2, variance 1/12.
  assert draws.min() >= 0 and draws.max() <= 1
  assert draws.mean() == pytest.approx(0.5, abs=0.04)
  assert draws.var() == pytest.approx(1 / 12, rel=0.15)
  assert float(fedlsr_tf.draw_mix(tf.constant([3, 9]))) == draws[9]


def _view(**overrides):
  draw = {'flip': False, 'jitter': False, 'gray': False, 'brightness': 1.0, 'contrast': 1.0,
          'saturation': 1.0, 'hue': 0.0, 'order': [0, 1, 2, 3], 'degrees': 0.0}
  draw.update(overrides)
  return {k: tf.constant(v) for k, v in draw.items()}


def test_colour_operations_by_hand():
  red = tf.constant([[[[1.0, 0.0, 0.0]]]])
  np.testing.assert_allclose(fedlsr_tf.grayscale(red), [[[[0.2989] * 3]]], rtol=1e-6)
  # Saturation ½: ½ (1, 0, 0) + ½ gray = (0.5 + 0.14945, 0.14945, 0.14945).
  np.testing.assert_allclose(fedlsr_tf.adjust_saturation(red, 0.5),
                             [[[[0.64945, 0.14945, 0.14945]]]], rtol=1e-5)
  # A third of the hue circle turns red into green.
  np.testing.assert_allclose(fedlsr_tf.adjust_hue(red, 1 / 3), [[[[0.0, 1.0, 0.0]]]], atol=1e-5)
  # Brightness 1.5: 0.6 -> 0.9; 2: clipped to 1.
  grey = tf.fill([1, 1, 1, 3], 0.6)
  np.testing.assert_allclose(fedlsr_tf.adjust_brightness(grey, 1.5), np.full((1, 1, 1, 3), 0.9),
                             rtol=1e-6)
  np.testing.assert_allclose(fedlsr_tf.adjust_brightness(grey, 2.0), np.ones((1, 1, 1, 3)))
  # Contrast ½ on two grey pixels 0.2 and 0.6: μ = 0.4 (0.2989 + 0.587 + 0.114) = 0.39996;
  # 0.2 -> 0.1 + 0.19998.
  two = tf.constant([[[[0.2] * 3, [0.6] * 3]]])
  np.testing.assert_allclose(fedlsr_tf.adjust_contrast(two, 0.5)[0, 0, 0], [0.29998] * 3,
                             rtol=1e-5)


def test_the_jitter_order_matters_by_hand():
  two = tf.constant([[[[0.2] * 3, [0.6] * 3]]])
  # Brightness 2 first: (0.4, 1.0 clipped), then contrast 0: every pixel the mean gray
  # (0.4 + 1.0)/2 · 0.9999 = 0.69993.
  first = fedlsr_tf.apply_view(two, _view(jitter=True, brightness=2.0, contrast=0.0,
                                          order=[0, 1, 2, 3]))
  np.testing.assert_allclose(first, np.full((1, 1, 2, 3), 0.69993), rtol=1e-4)
  # Contrast 0 first: 0.39996 everywhere, then brightness 2: 0.79992.
  second = fedlsr_tf.apply_view(two, _view(jitter=True, brightness=2.0, contrast=0.0,
                                           order=[1, 0, 2, 3]))
  np.testing.assert_allclose(second, np.full((1, 1, 2, 3), 0.79992), rtol=1e-4)
  # Without the jitter flag nothing changes.
  np.testing.assert_allclose(fedlsr_tf.apply_view(two, _view(brightness=2.0)), two)


def test_flip_and_grayscale_of_the_view():
  image = tf.constant([[[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]]])
  np.testing.assert_allclose(fedlsr_tf.apply_view(image, _view(flip=True)),
                             [[[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]]])
  np.testing.assert_allclose(fedlsr_tf.apply_view(image, _view(gray=True)),
                             [[[[0.2989] * 3, [0.114] * 3]]], rtol=1e-6)


def test_rotation_by_hand():
  # 3 x 3, one channel, a 1 right of the centre (row 1, column 2): a quarter turn
  # counter-clockwise takes it above the centre (row 0, column 1).
  image = np.zeros((1, 3, 3, 1), np.float32)
  image[0, 1, 2, 0] = 1.0
  want = np.zeros_like(image)
  want[0, 0, 1, 0] = 1.0
  np.testing.assert_allclose(fedlsr_tf.rotate(tf.constant(image), 90.0), want, atol=1e-6)
  np.testing.assert_allclose(fedlsr_tf.apply_view(tf.constant(image), _view(degrees=90.0)),
                             want, atol=1e-6)


def test_view_draws_have_the_codes_rates_and_ranges():
  draws = [fedlsr_tf.draw_view(tf.constant([5, i])) for i in range(400)]
  rate = lambda key: np.mean([bool(d[key]) for d in draws])
  assert rate('flip') == pytest.approx(0.5, abs=0.07)
  assert rate('jitter') == pytest.approx(0.8, abs=0.06)
  assert rate('gray') == pytest.approx(0.2, abs=0.06)
  factors = np.array([[float(d[k]) for k in ('brightness', 'contrast', 'saturation')]
                      for d in draws])
  assert factors.min() >= 0.2 and factors.max() <= 1.8
  hues = np.array([float(d['hue']) for d in draws])
  assert hues.min() >= -0.2 and hues.max() <= 0.2 and hues.std() > 0.1
  degrees = np.array([float(d['degrees']) for d in draws])
  assert degrees.min() >= -30 and degrees.max() <= 30
  assert all(sorted(d['order'].numpy()) == [0, 1, 2, 3] for d in draws[:20])


def test_second_view_is_fixed_by_the_seed_and_traces():
  rng = np.random.default_rng(3)
  images = tf.constant(rng.random((4, 5, 5, 3)).astype(np.float32))
  eager = [fedlsr_tf.second_view(images, tf.constant([1, i])) for i in range(8)]
  traced = tf.function(fedlsr_tf.second_view)
  for i, view in enumerate(eager):
    assert view.shape == images.shape
    assert float(tf.reduce_min(view)) >= 0 and float(tf.reduce_max(view)) <= 1
    np.testing.assert_allclose(traced(images, tf.constant([1, i])), view, atol=1e-6)
  assert len({np.round(v.numpy().sum(), 4) for v in eager}) > 1
