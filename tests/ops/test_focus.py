"""FOCUS's credibility and weights (ops.focus), against hand-computed values."""

import numpy as np
import pytest

from tff_noisy.ops import focus


def test_credibility_is_one_minus_the_softmax_of_alpha_times_the_mutual_cross_entropy():
  # E = (0.4 + 0.6, 0.7 + 0.3, 1.5 + 0.5) = (1, 1, 2), alpha = 1: softmax = (1, 1, e) / (2 + e).
  mutual = focus.mutual_cross_entropy([0.4, 0.7, 1.5], [0.6, 0.3, 0.5])
  np.testing.assert_allclose(mutual, [1.0, 1.0, 2.0])
  e = np.e
  np.testing.assert_allclose(focus.credibility(mutual, 1.0),
                             [1 - 1 / (2 + e), 1 - 1 / (2 + e), 1 - e / (2 + e)])
  # A large alpha leaves the least credible client near 0 and the others near 1, without
  # overflowing (exp(1000) alone would).
  np.testing.assert_allclose(focus.credibility([1.0, 1.5, 2.0], 1000.0), [1, 1, 0], atol=1e-12)


def test_weights_are_credibility_times_examples_normalised():
  e = np.e
  c = np.array([1 - 1 / (2 + e), 1 - 1 / (2 + e), 1 - e / (2 + e)])
  result = focus.weights([0.4, 0.7, 1.5], [0.6, 0.3, 0.5], [10, 20, 10], alpha=1.0)
  assert result.status == focus.OK
  np.testing.assert_allclose(result.weights, c * [10, 20, 10] / (c @ [10, 20, 10]))
  np.testing.assert_allclose(result.credibility, c)
  plain = focus.weights([0.4, 0.7, 1.5], [0.6, 0.3, 0.5], [10, 20, 10], alpha=1.0,
                        times_examples=False)
  np.testing.assert_allclose(plain.weights, c / c.sum())


def test_an_unusable_client_gets_weight_zero_and_stays_out_of_the_softmax():
  result = focus.weights([0.4, np.nan, 0.7, 1.5], [0.6, 0.1, 0.3, 0.5], [10, 5, 10, 0],
                         alpha=1.0)
  # Client 1's loss is NaN and client 3 has no examples: the softmax runs over E = (1, 1).
  np.testing.assert_allclose(result.weights, [0.5, 0.0, 0.5, 0.0])
  assert np.isnan(result.credibility[[1, 3]]).all()
  np.testing.assert_allclose(result.credibility[[0, 2]], [0.5, 0.5])


@pytest.mark.parametrize('losses, sizes, expected', [
    ([0.5, np.inf], [10, 30], [1.0, 0.0]),  # One usable client: its examples' weight.
    ([0.5], [10], [1.0]),
    ([np.nan, np.nan], [10, 30], [0.0, 0.0]),  # None usable: all zero (nothing aggregated).
])
def test_fewer_than_two_usable_clients_fall_back_to_examples(losses, sizes, expected):
  result = focus.weights(losses, np.zeros(len(losses)), sizes, alpha=10.0)
  assert result.status == focus.TOO_FEW
  np.testing.assert_allclose(result.weights, expected)
