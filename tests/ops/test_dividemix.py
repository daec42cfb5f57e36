"""DivideMix (Li et al. 2020): the GMM clean probability, sharpening, co-refinement,
co-guessing, the MixMatch λ' and the three loss terms by hand, and the TensorFlow twins
against NumPy."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import dividemix
from tff_noisy.ops import dividemix_tf

LOG3 = np.log(3.0)


def test_losses_are_min_max_scaled_and_all_equal_losses_give_zeros():
  np.testing.assert_allclose(dividemix.normalized_losses([1.0, 3.0, 2.0]), [0.0, 1.0, 0.5])
  np.testing.assert_array_equal(dividemix.normalized_losses([2.0, 2.0]), [0.0, 0.0])


def test_two_tight_loss_clusters_give_clean_probability_one_and_zero():
  # Scaled losses (0, 0, 0, 1, 1, 1): the GMM puts a component on each cluster with
  # variance reg_covar = 5e-4, so the smaller-mean component's posterior at 1 is
  # ~exp(-1 / (2 * 5e-4)) = exp(-1000) = 0 and at 0 it is 1.
  w = dividemix.clean_probability([0.2, 0.2, 0.2, 4.0, 4.0, 4.0])
  np.testing.assert_allclose(w, [1, 1, 1, 0, 0, 0], atol=1e-12)


def test_clean_probability_depends_on_the_losses_only_through_their_scaling():
  rng = np.random.default_rng(0)
  losses = np.concatenate([rng.gamma(2.0, 0.1, 40), rng.gamma(2.0, 0.1, 15) + 2.0])
  w = dividemix.clean_probability(losses)
  np.testing.assert_allclose(dividemix.clean_probability(3.0 * losses + 1.0), w, atol=1e-9)
  # The small-loss block is clean, the large-loss block is not.
  assert w[:40].min() > 0.9 and w[40:].max() < 0.1
  np.testing.assert_array_equal(dividemix.divide(w), np.arange(55) < 40)


def test_no_split_possible_means_every_example_is_clean():
  np.testing.assert_array_equal(dividemix.clean_probability([0.7]), [1.0])
  np.testing.assert_array_equal(dividemix.clean_probability([0.7, 0.7, 0.7]), [1, 1, 1])


def test_divide_is_strictly_above_the_threshold():
  np.testing.assert_array_equal(dividemix.divide([0.2, 0.5, 0.7]), [False, False, True])
  np.testing.assert_array_equal(dividemix.divide([0.2, 0.5, 0.7], 0.1), [True, True, True])


def test_sharpen_by_hand():
  # T = 1/2 squares: (1/16, 9/16) / (10/16) = (0.1, 0.9); T = 1 is the identity.
  np.testing.assert_allclose(dividemix.sharpen([0.25, 0.75], 0.5), [0.1, 0.9])
  np.testing.assert_allclose(dividemix.sharpen([[0.25, 0.75]], 1.0), [[0.25, 0.75]])


def test_co_refinement_by_hand():
  # Augmentations' logits (0, 0) and (0, log 3): softmax (1/2, 1/2) and (1/4, 3/4), mean
  # (3/8, 5/8). Label 0, w = 1/2: ȳ = (1/2)(1, 0) + (1/2)(3/8, 5/8) = (11/16, 5/16);
  # sharpened with T = 1/2: (121, 25) / 146.
  logits = np.array([[[0.0, 0.0]], [[0.0, LOG3]]])
  np.testing.assert_allclose(dividemix.refine_labels([0], [0.5], logits, 0.5),
                             [[121 / 146, 25 / 146]])
  # w = 1 keeps the label; w = 0 is the sharpened mean prediction (9, 25) / 34.
  np.testing.assert_allclose(dividemix.refine_labels([0], [1.0], logits, 0.5), [[1.0, 0.0]])
  np.testing.assert_allclose(dividemix.refine_labels([1], [0.0], logits, 0.5),
                             [[9 / 34, 25 / 34]])


def test_co_guessing_by_hand():
  # f: (1/2, 1/2) and (1/4, 3/4); g: (1/4, 3/4) twice. Mean of the four: (5/16, 11/16);
  # sharpened with T = 1/2: (25, 121) / 146.
  f = np.array([[[0.0, 0.0]], [[0.0, LOG3]]])
  g = np.array([[[0.0, LOG3]], [[0.0, LOG3]]])
  np.testing.assert_allclose(dividemix.co_guess(f, g, 0.5), [[25 / 146, 121 / 146]])


def test_mixmatch_keeps_the_larger_weight_on_the_example_itself():
  assert dividemix.mixmatch_lambda(0.3) == pytest.approx(0.7)
  assert dividemix.mixmatch_lambda(0.8) == pytest.approx(0.8)
  # λ = 1/4 -> λ' = 3/4: row 0 = (3/4)(0, 4) + (1/4)(8, 0) = (2, 3); row 1 = (6, 1).
  x = np.array([[0.0, 4.0], [8.0, 0.0]])
  np.testing.assert_allclose(dividemix.mix(x, 0.25, [1, 0]), [[2.0, 3.0], [6.0, 1.0]])


def test_loss_terms_by_hand():
  # Logits (0, log 3): p = (1/4, 3/4).
  row = np.array([[0.0, LOG3]])
  # L_X against (1/2, 1/2): -(1/2)(log 1/4 + log 3/4) = (1/2) log(16/3).
  assert dividemix.labelled_loss(row, [[0.5, 0.5]]) == pytest.approx(0.5 * np.log(16 / 3))
  # L_U against (0, 1): ((1/4)^2 + (1/4)^2) / 2 = 1/16.
  assert dividemix.unlabelled_loss(row, [[0.0, 1.0]]) == pytest.approx(1 / 16)
  # L_reg: mean prediction (1/4, 3/4) -> (1/2) log 2 + (1/2) log(2/3) = (1/2) log(4/3);
  # with the mirrored row (3/4, 1/4) the mean is uniform and L_reg = 0.
  assert dividemix.prior_regularizer(row) == pytest.approx(0.5 * np.log(4 / 3))
  assert dividemix.prior_regularizer([[0.0, LOG3], [LOG3, 0.0]]) == pytest.approx(0.0)
  # L = L_X + 2 L_U + L_reg = (1/2) log(16/3) + 1/8 + (1/2) log(4/3) = log(8/3) + 1/8.
  total = dividemix.dividemix_loss(row, [[0.5, 0.5]], row, [[0.0, 1.0]], lambda_u=2.0)
  assert total == pytest.approx(np.log(8 / 3) + 0.125)
  # Per example, N = 2 rows with one in X': (2 L_X + L_reg, 2 * 2 L_U + L_reg).
  per = dividemix.per_example_loss(np.concatenate([row, row]), [[0.5, 0.5], [0.0, 1.0]], 1,
                                   lambda_u=2.0)
  reg = 0.5 * np.log(4 / 3)
  np.testing.assert_allclose(per, [np.log(16 / 3) + reg, 0.25 + reg])
  assert per.mean() == pytest.approx(total)


def test_lambda_u_ramps_over_16_rounds_after_warm_up():
  # T_w = 24, λ_u = 25: 0 until round 24, 25 * 8 / 16 at 32, 25 from 40 on.
  weights = [dividemix.lambda_u_weight(t, 24, 25.0) for t in (20, 24, 32, 40, 50)]
  np.testing.assert_allclose(weights, [0.0, 0.0, 12.5, 25.0, 25.0])
  assert dividemix.lambda_u_weight(24.5, 24, 16.0) == pytest.approx(0.5)


def test_the_tensorflow_twins_equal_numpy():
  rng = np.random.default_rng(1)
  logits_f = rng.normal(size=(2, 5, 4)).astype(np.float32)
  logits_g = rng.normal(size=(2, 5, 4)).astype(np.float32)
  labels = rng.integers(0, 4, 5)
  w = rng.uniform(size=5).astype(np.float32)
  p = rng.dirichlet(np.ones(4), 5).astype(np.float32)
  np.testing.assert_allclose(dividemix_tf.sharpen(tf.constant(p), 0.5),
                             dividemix.sharpen(p, 0.5), rtol=1e-5)
  np.testing.assert_allclose(dividemix_tf.refine_labels(labels, w, logits_f, 0.5),
                             dividemix.refine_labels(labels, w, logits_f, 0.5), rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(dividemix_tf.co_guess(logits_f, logits_g, 0.5),
                             dividemix.co_guess(logits_f, logits_g, 0.5), rtol=1e-5, atol=1e-6)
  logits = rng.normal(size=(7, 4)).astype(np.float32)
  targets = rng.dirichlet(np.ones(4), 7).astype(np.float32)
  np.testing.assert_allclose(np.mean(dividemix_tf.labelled_loss(logits[:3], targets[:3])),
                             dividemix.labelled_loss(logits[:3], targets[:3]), rtol=1e-5)
  np.testing.assert_allclose(np.mean(dividemix_tf.unlabelled_loss(logits[3:], targets[3:])),
                             dividemix.unlabelled_loss(logits[3:], targets[3:]), rtol=1e-5)
  np.testing.assert_allclose(dividemix_tf.prior_regularizer(tf.constant(logits)),
                             dividemix.prior_regularizer(logits), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(
      dividemix_tf.per_example_loss(tf.constant(logits), targets, 3, 25.0),
      dividemix.per_example_loss(logits, targets, 3, 25.0), rtol=1e-5)
  for t in (20.0, 30.5, 41.0):
    assert float(dividemix_tf.lambda_u_weight(t, 24, 25.0)) == pytest.approx(
        dividemix.lambda_u_weight(t, 24, 25.0))


def test_the_gradient_is_that_of_the_total_loss_and_skips_the_targets():
  rng = np.random.default_rng(2)
  logits = tf.Variable(rng.normal(size=(6, 3)).astype(np.float32))
  targets = tf.constant(rng.dirichlet(np.ones(3), 6).astype(np.float32))
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(targets)
    mean = tf.reduce_mean(dividemix_tf.per_example_loss(logits, targets, 4, 5.0, 1.0))
    total = (tf.reduce_mean(dividemix_tf.labelled_loss(logits[:4], targets[:4]))
             + 5.0 * tf.reduce_mean(dividemix_tf.unlabelled_loss(logits[4:], targets[4:]))
             + dividemix_tf.prior_regularizer(logits))
  np.testing.assert_allclose(mean, total, rtol=1e-6)
  np.testing.assert_allclose(tape.gradient(mean, logits), tape.gradient(total, logits),
                             rtol=1e-5, atol=1e-7)
  assert tape.gradient(mean, targets) is None
  w = tf.Variable([0.5, 0.5])
  with tf.GradientTape() as tape:
    refined = dividemix_tf.refine_labels([0, 1], w, tf.zeros([2, 2, 2]), 0.5)
  assert tape.gradient(refined, w) is None


def test_the_mixmatch_draw_is_at_least_one_half_and_a_permutation():
  draws = [dividemix_tf.draw(tf.constant([3, i]), 8, 4.0) for i in range(50)]
  lams = np.array([float(lam) for lam, _ in draws])
  assert lams.min() >= 0.5 and lams.max() <= 1.0
  for _, permutation in draws:
    assert sorted(permutation.numpy()) == list(range(8))


def _gamma_losses(seed=0):
  rng = np.random.default_rng(seed)
  return np.concatenate([rng.gamma(2.0, 0.1, 40), rng.gamma(2.0, 0.1, 15) + 1.5])


def test_the_fixed_start_em_is_sklearn_s_em_from_that_start():
  # sklearn's GaussianMixture given weights (1/2, 1/2), means (0, 1) and both variances
  # var(x) + reg_covar runs the same EM iterations and stopping rule.
  from sklearn import mixture  # pylint: disable=g-import-not-at-top
  losses = _gamma_losses()
  x = dividemix.normalized_losses(losses)[:, None]
  var = x.var() + dividemix.GMM_REG_COVAR
  gmm = mixture.GaussianMixture(2, max_iter=dividemix.GMM_MAX_ITER, tol=dividemix.GMM_TOL,
                                reg_covar=dividemix.GMM_REG_COVAR, weights_init=[0.5, 0.5],
                                means_init=[[0.0], [1.0]],
                                precisions_init=np.full((2, 1, 1), 1.0 / var))
  gmm.fit(x)
  expected = gmm.predict_proba(x)[:, int(np.argmin(gmm.means_[:, 0]))]
  np.testing.assert_allclose(dividemix.clean_probability_em(losses), expected, atol=1e-9)


def test_the_fixed_start_em_splits_tight_clusters_and_cannot_split_equal_losses():
  # As the sklearn fit above: each cluster gets a component of variance reg_covar.
  np.testing.assert_allclose(dividemix.clean_probability_em([0.2, 0.2, 0.2, 4.0, 4.0, 4.0]),
                             [1, 1, 1, 0, 0, 0], atol=1e-12)
  np.testing.assert_array_equal(dividemix.clean_probability_em([0.7]), [1.0])
  np.testing.assert_array_equal(dividemix.clean_probability_em([0.7, 0.7]), [1.0, 1.0])
  w = dividemix.clean_probability_em(_gamma_losses())
  assert w[:40].min() > 0.9 and w[40:].max() < 0.1


@pytest.mark.parametrize('losses', [_gamma_losses(0), _gamma_losses(3)[::-1],
                                    np.array([0.2, 0.2, 0.2, 4.0, 4.0, 4.0]),
                                    np.array([0.5]), np.array([1.0, 1.0, 1.0])])
def test_tf_em_matches_numpy(losses):
  np.testing.assert_allclose(dividemix_tf.clean_probability(tf.constant(losses, tf.float32)),
                             dividemix.clean_probability_em(losses.astype(np.float32)),
                             atol=1e-5)


def test_tf_em_stops_at_max_iter():
  losses = _gamma_losses()
  np.testing.assert_allclose(dividemix_tf.clean_probability(losses, max_iter=1, tol=0.0),
                             dividemix.clean_probability_em(losses, max_iter=1, tol=0.0),
                             atol=1e-6)
  assert not np.allclose(dividemix.clean_probability_em(losses, max_iter=1, tol=0.0),
                         dividemix.clean_probability_em(losses), atol=1e-3)


def test_masked_loss_is_the_ordered_one_with_rows_anywhere():
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(5, 3))
  targets = dividemix.sharpen(rng.uniform(size=(5, 3)), 0.5)
  ordered = dividemix.per_example_loss(logits, targets, 2, lambda_u=3.0, lambda_r=0.5)
  np.testing.assert_allclose(dividemix.masked_per_example_loss(
      logits, targets, [True, True, False, False, False], 3.0, 0.5), ordered)
  order = np.array([3, 0, 4, 1, 2])  # Labelled rows 0, 1 land at places 1 and 3.
  moved = dividemix.masked_per_example_loss(logits[order], targets[order],
                                            order < 2, 3.0, 0.5)
  np.testing.assert_allclose(moved, ordered[order])
  np.testing.assert_allclose(
      dividemix_tf.masked_per_example_loss(tf.constant(logits[order], tf.float32),
                                           tf.constant(targets[order], tf.float32),
                                           tf.constant(order < 2), 3.0, 0.5),
      moved, rtol=1e-5)


def test_masked_loss_by_hand_with_no_labelled_row():
  # Logits 0: softmax (1/2, 1/2); targets (1, 0): every row is U', squared error mean_c
  # = 1/4, λ_u = 2 gives 1/2 per row; L_reg = 0 (mean prediction uniform).
  loss = dividemix.masked_per_example_loss(np.zeros((2, 2)), [[1, 0], [1, 0]],
                                           [False, False], 2.0)
  np.testing.assert_allclose(loss, [0.5, 0.5])


def test_selection_report_by_hand():
  # Clean: examples 0, 1, 3 (observed = true). Selected 0, 2: one clean of two selected,
  # one of three clean selected.
  report = dividemix.selection_report([True, False, True, False], [0, 1, 2, 0],
                                      [0, 1, 1, 0])
  assert report == {'selected': 2, 'precision': 0.5, 'recall': pytest.approx(1 / 3)}
  assert dividemix.selection_report([False], [0], [1]) == {
      'selected': 0, 'precision': None, 'recall': None}
