"""FedRN (Kim et al. 2022): expertise, the reliability score, the neighbour choice and the
ensembled clean-sample selection, by hand."""
import numpy as np
import pytest

from tff_noisy.ops import fedrn


def test_expertise_is_the_accuracy_against_the_observed_labels():
  # Predictions (0, 1, 0) against labels (0, 0, 0): 2 of 3.
  assert fedrn.expertise([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]], [0, 0, 0]) == pytest.approx(2 / 3)
  assert fedrn.expertise(np.zeros((0, 2)), []) == 0.0


def test_cosine_similarity_by_hand_and_zero_for_a_zero_vector():
  assert fedrn.cosine_similarity([1.0, 0.0], [1.0, 1.0]) == pytest.approx(1 / np.sqrt(2))
  assert fedrn.cosine_similarity([1.0, 2.0], [-2.0, 1.0]) == pytest.approx(0.0)
  assert fedrn.cosine_similarity([0.0, 0.0], [1.0, 1.0]) == 0.0


def test_reliability_scores_by_hand():
  # Client 0 of 3. Expertise (0.2, 0.6, 1.0) -> scaled (0, 1/2, 1). Probe outputs (1, 0),
  # (1, 1), (0, 1): similarity to client 0 (1, 1/√2, 0), already in [0, 1].
  # α = 0.6: R_01 = 0.6 * 1/2 + 0.4 / √2, R_02 = 0.6 * 1 + 0.4 * 0 = 0.6, and the self
  # score R_00 = 0.6 * 0 + 0.4 = 0.4.
  scores = fedrn.reliability_scores(0, [0.2, 0.6, 1.0], [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]],
                                    alpha=0.6)
  np.testing.assert_allclose(scores, [0.4, 0.3 + 0.4 / np.sqrt(2), 0.6])
  np.testing.assert_array_equal(fedrn.select_neighbors(0, scores, 1), [2])
  np.testing.assert_array_equal(fedrn.select_neighbors(0, scores, 2), [2, 1])
  # α = 1: expertise only; α = 0: similarity only, client 1 first.
  np.testing.assert_allclose(
      fedrn.reliability_scores(0, [0.2, 0.6, 1.0], [[1, 0], [1, 1], [0, 1]], 1.0), [0, 0.5, 1])
  only_similarity = fedrn.reliability_scores(0, [0.2, 0.6, 1.0], [[1, 0], [1, 1], [0, 1]], 0.0)
  np.testing.assert_array_equal(fedrn.select_neighbors(0, only_similarity, 1), [1])


def test_similarity_is_min_max_scaled_over_all_clients():
  # Client 1's output (1, -1) against (1, 1), itself and (-1, 1): similarities (0, 1, -1),
  # scaled from [-1, 1] to (1/2, 1, 0). Equal expertise scales to 0. α = 1/2: R = (1/4,
  # self 1/2, 0).
  scores = fedrn.reliability_scores(1, [0.5, 0.5, 0.5], [[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0]],
                                    alpha=0.5)
  np.testing.assert_allclose(scores, [0.25, 0.5, 0.0], atol=1e-12)


def test_neighbours_skip_the_client_and_break_ties_by_index():
  np.testing.assert_array_equal(fedrn.select_neighbors(1, [0.3, 0.9, 0.3, 0.5], 2), [3, 0])
  np.testing.assert_array_equal(fedrn.select_neighbors(1, [0.3, 0.9, 0.3, 0.5], 3), [3, 0, 2])
  with pytest.raises(ValueError, match='k must be'):
    fedrn.select_neighbors(0, [0.1, 0.2], 2)
  with pytest.raises(ValueError, match='alpha'):
    fedrn.reliability_scores(0, [0.1, 0.2], [[1, 0], [0, 1]], 1.5)


def test_ensemble_is_the_score_weighted_mean_of_the_clean_probabilities():
  # Scores (3, 1) -> weights (3/4, 1/4): (3/4, 1/4, 1/2).
  probs = [[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]]
  np.testing.assert_allclose(fedrn.ensemble_clean_probability(probs, [3.0, 1.0]),
                             [0.75, 0.25, 0.5])
  np.testing.assert_allclose(fedrn.ensemble_clean_probability(probs, [0.0, 0.0]),
                             [0.5, 0.5, 0.5])


def test_clean_mask_is_strict_and_falls_back_to_every_example():
  np.testing.assert_array_equal(fedrn.clean_mask([0.75, 0.25, 0.5]), [True, False, False])
  np.testing.assert_array_equal(fedrn.clean_mask([0.1, 0.2]), [True, True])


def test_the_more_reliable_model_decides_the_clean_set():
  # Own model: losses (0, 0, 0, 5, 5, 5) -> w = (1, 1, 1, 0, 0, 0) (two tight clusters,
  # variance reg_covar); the neighbour disagrees: w = (0, 0, 0, 1, 1, 1). Scores 0.4 vs
  # 0.6: w̄ = (0.4, 0.4, 0.4, 0.6, 0.6, 0.6) -> the last three; 0.7 vs 0.3: the first three.
  own = [0.0, 0.0, 0.0, 5.0, 5.0, 5.0]
  neighbour = [[5.0, 5.0, 5.0, 0.0, 0.0, 0.0]]
  np.testing.assert_array_equal(fedrn.clean_examples(own, neighbour, 0.4, [0.6]),
                                [False] * 3 + [True] * 3)
  np.testing.assert_array_equal(fedrn.clean_examples(own, neighbour, 0.7, [0.3]),
                                [True] * 3 + [False] * 3)
  # Equal scores: w̄ = 1/2 everywhere, nothing passes, every example is kept.
  np.testing.assert_array_equal(fedrn.clean_examples(own, neighbour, 0.5, [0.5]), [True] * 6)


def test_cross_entropy_by_hand():
  # z = (0, 0): -log 1/2; z = (log 3, 0), y = 0: -log 3/4.
  np.testing.assert_allclose(fedrn.cross_entropy([[0.0, 0.0], [np.log(3.0), 0.0]], [1, 0]),
                             [np.log(2.0), np.log(4.0 / 3.0)])


def test_finetune_head_is_sgd_with_momentum_on_the_linear_head_by_hand():
  # φ = (1), y = 0, W = (0, 0), b = (0, 0), η = 1. Step 1: p = (1/2, 1/2), ∂z = (−1/2, 1/2),
  # ∂W = φᵀ∂z = (−1/2, 1/2) = ∂b, m = g: W = b = (1/2, −1/2). Step 2: z = (1, −1),
  # p_0 = σ(2), ∂z = (σ(2) − 1, 1 − σ(2)); μ = 1/2: m_0 = −1/4 + σ(2) − 1, W_0 = 1/2 − m_0.
  s = 1.0 / (1.0 + np.exp(-2.0))
  kernel, bias = fedrn.finetune_head([[1.0]], [0], [[0.0, 0.0]], [0.0, 0.0], [[0], [0]],
                                     lr=1.0, momentum=0.5)
  w0 = 0.5 - (-0.25 + s - 1.0)
  np.testing.assert_allclose(kernel, [[w0, -w0]])
  np.testing.assert_allclose(bias, [w0, -w0])
  # One step on a batch of two, φ = (1, 2) with labels (0, 1), η = 1/2, weight decay 1/10 on
  # W = (1, 0), b = (0, 0): z = (1, 0) and (2, 0); p_0 = σ(1), σ(2).
  # ∂z/2 per row: ((σ(1) − 1)/2, (1 − σ(1))/2) and (σ(2)/2, −σ(2)/2).
  # ∂W_0 = (σ(1) − 1)/2 + 2 σ(2)/2 + 0.1, ∂b_0 = (σ(1) − 1)/2 + σ(2)/2.
  s1 = 1.0 / (1.0 + np.exp(-1.0))
  kernel, bias = fedrn.finetune_head([[1.0], [2.0]], [0, 1], [[1.0, 0.0]], [0.0, 0.0],
                                     [[0, 1]], lr=0.5, weight_decay=0.1)
  g_w0 = (s1 - 1) / 2 + s + 0.1
  g_b0 = (s1 - 1) / 2 + s / 2
  np.testing.assert_allclose(kernel, [[1.0 - 0.5 * g_w0, 0.5 * (g_w0 - 0.1)]])
  np.testing.assert_allclose(bias, [-0.5 * g_b0, 0.5 * g_b0])
  # No batch (no clean example): the head as it was.
  kernel, bias = fedrn.finetune_head(np.zeros((0, 1)), [], [[1.0, 2.0]], [3.0, 4.0], [], 1.0)
  np.testing.assert_array_equal(kernel, [[1.0, 2.0]])
  np.testing.assert_array_equal(bias, [3.0, 4.0])
