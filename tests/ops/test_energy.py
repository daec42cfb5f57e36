"""Energy scores, pooled and histogram thresholds, noise estimates, NA-FedAvg weights."""

import numpy as np
import pytest

from tff_noisy.ops import energy


def test_energy_score_matches_the_formula():
  logits = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [-4.0, 10.0, 2.5]])
  for temperature in (1.0, 0.5, 4.0):
    expected = temperature * np.log(np.exp(logits / temperature).sum(axis=1))
    np.testing.assert_allclose(energy.energy_score(logits, temperature), expected, rtol=1e-12)
  np.testing.assert_allclose(energy.energy_score([0.0, 0.0]), np.log(2.0))


def test_energy_score_is_stable_for_large_logits():
  np.testing.assert_allclose(energy.energy_score([[1000.0, 1000.0], [-1000.0, -1000.0]]),
                             [1000.0 + np.log(2.0), -1000.0 + np.log(2.0)])


def test_pooled_threshold_is_the_percentile_of_all_scores():
  scores = [np.arange(10.0), np.arange(10.0, 40.0), np.array([])]
  assert energy.pooled_threshold(scores, 75) == np.percentile(np.arange(40.0), 75)


def test_noise_estimate_counts_scores_below_tau():
  assert energy.noise_estimate([1.0, 2.0, 3.0, 4.0], tau=3.0) == 0.5
  assert energy.noise_estimate([5.0, 6.0], tau=3.0) == 0.0


def test_histogram_threshold_is_within_one_bin_of_the_pooled_percentile():
  rng = np.random.default_rng(0)
  scores = [rng.normal(loc, 1.0, size) for loc, size in ((2.0, 300), (4.0, 500), (3.0, 80))]
  edges = np.linspace(-2.0, 9.0, 45)
  counts = sum(energy.score_histogram(s, edges) for s in scores)
  assert counts.sum() == 880
  for nu in (10, 50, 75, 99):
    exact = energy.pooled_threshold(scores, nu)
    assert abs(energy.threshold_from_histograms(counts, edges, nu) - exact) <= edges[1] - edges[0]


def test_histogram_puts_outliers_in_the_end_bins():
  np.testing.assert_array_equal(energy.score_histogram([-5.0, 0.5, 1.5, 7.0], [0, 1, 2]), [2, 2])


def test_noise_estimate_ranks_noisy_clients_above_clean_ones():
  rng = np.random.default_rng(0)
  global_scores = [rng.normal(5.0, 1.0, 400) for _ in range(6)]
  # After local training clean clients grow more confident, noisy ones less
  # (docs/papers/fedln.md, ambiguity 2).
  shifts = np.array([1.0, 0.8, 0.6, -0.6, -0.8, -1.0])
  local_scores = [g + s + rng.normal(0, 0.3, g.size) for g, s in zip(global_scores, shifts)]
  tau = energy.pooled_threshold(global_scores, 75)
  estimates = np.array([energy.noise_estimate(s, tau) for s in local_scores])
  assert estimates[3:].min() > estimates[:3].max()
  weights = energy.na_fedavg_weights(estimates, [400] * 6)
  assert weights.sum() == pytest.approx(1.0) and weights[:3].min() > weights[3:].max()


def test_na_fedavg_weights():
  np.testing.assert_allclose(energy.na_fedavg_weights([0.0, 0.5, 1.0], [100, 200, 50]),
                             [0.5, 0.5, 0.0])
  np.testing.assert_allclose(energy.na_fedavg_weights([1.0, 1.0], [10, 30]), [0.5, 0.5])
  with pytest.raises(ValueError, match='2 noise estimates for 3 clients'):
    energy.na_fedavg_weights([0.1, 0.2], [1, 2, 3])


@pytest.mark.parametrize('nu', [0, 100, -5, 150])
def test_nu_outside_the_open_interval_is_rejected(nu):
  with pytest.raises(ValueError, match=f'nu={nu}'):
    energy.pooled_threshold([np.arange(5.0)], nu)
  with pytest.raises(ValueError, match=f'nu={nu}'):
    energy.threshold_from_histograms([1, 2], [0.0, 1.0, 2.0], nu)
