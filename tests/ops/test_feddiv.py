"""FedDiv's maths (``ops.feddiv``) against values worked out by hand, and its EM step
against sklearn's one-step warm-started fit, the released code's filter."""

import warnings

import numpy as np
import pytest
import scipy.special

from tff_noisy.ops import feddiv

_A = scipy.special.expit(0.5)  # σ(0.5): posterior of the nearer of two unit Gaussians 1 apart.
_B = 1.0 - _A


def test_filter_losses_by_hand():
  probs = np.array([[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]])
  labels = [0, 0, 1]
  # CE on softmax outputs: log Σ_c exp(p_c) − p_y: log(2e^0.5) − 0.5 = log 2; log(e + 1) − 1;
  # log(e + 1) − 0.
  np.testing.assert_allclose(feddiv.filter_losses(probs, labels),
                             [np.log(2), np.log(np.e + 1) - 1, np.log(np.e + 1)])
  # −log p_y: log 2, 0, and p_y = 0 clipped at the smallest float64.
  np.testing.assert_allclose(feddiv.filter_losses(probs, labels, 'cross_entropy'),
                             [np.log(2), 0.0, -np.log(np.finfo(np.float64).tiny)])
  with pytest.raises(ValueError, match='filter loss'):
    feddiv.filter_losses(probs, labels, 'mae')


def test_losses_are_scaled_by_their_min_and_max():
  np.testing.assert_allclose(feddiv.scaled_losses([1.0, 3.0, 5.0]), [0.0, 0.5, 1.0])
  np.testing.assert_array_equal(feddiv.scaled_losses([2.0, 2.0]), [0.0, 0.0])


_UNIT = np.array([[0.5, 0.5], [0.0, 1.0], [1.0, 1.0]])  # π = 1/2, μ = 0 and 1, σ² = 1.


def test_posterior_by_hand():
  # At x = 0 the log-odds of component 0 are (1 − 0)²/2 − 0 = 1/2; at 1/2 they are 0.
  np.testing.assert_allclose(feddiv.posterior([0.0, 0.5, 1.0], _UNIT),
                             [[_A, _B], [0.5, 0.5], [_B, _A]])


def test_one_em_step_by_hand():
  # x = (0, 1): responsibilities (a, b) and (b, a); n_j = a + b = 1; μ_0 = b, μ_1 = a;
  # σ²_0 = a·b² + b·(1 − b)² = a·b² + b·a² = ab, the same for σ²_1; π = 1/2 each.
  step = feddiv.em_step([0.0, 1.0], _UNIT)
  np.testing.assert_allclose(step, [[0.5, 0.5], [_B, _A],
                                    [_A * _B + 1e-6, _A * _B + 1e-6]], rtol=1e-12)
  np.testing.assert_allclose(feddiv.local_filter([0.0, 1.0], _UNIT, iterations=2),
                             feddiv.em_step([0.0, 1.0], step))


def test_the_em_step_is_sklearns_one_step_warm_started_fit():
  """The code's local filter: sklearn's GaussianMixture(max_iter=1) fitted once from the
  global filter's weights, means and precisions."""
  from sklearn import mixture  # pylint: disable=g-import-not-at-top
  x = np.array([0.0, 0.05, 0.1, 0.2, 0.7, 0.9, 1.0])
  start = np.array([[0.4, 0.6], [0.3, 0.6], [0.05, 0.2]])
  gmm = mixture.GaussianMixture(2, weights_init=start[0], means_init=start[1][:, None],
                                precisions_init=(1 / start[2])[:, None, None], max_iter=1)
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')  # One step does not converge.
    gmm.fit(x[:, None])
  np.testing.assert_allclose(feddiv.em_step(x, start), np.stack(
      [gmm.weights_, gmm.means_[:, 0], gmm.covariances_[:, 0, 0]]), rtol=1e-10)


def test_filters_aggregate_with_the_codes_weights():
  # γ = (1/4, 3/4): π = (.25·.2 + .75·.6, .25·.8 + .75·.4) = (.5, .5); μ = (.25·.1 + .75·.3,
  # .25·.6 + .75·.9) = (.25, .825); σ² with γ²: (.0625·.04 + .5625·.02, .0625·.08 +
  # .5625·.01) = (.01375, .010625).
  filters = [[[0.2, 0.8], [0.1, 0.6], [0.04, 0.08]], [[0.6, 0.4], [0.3, 0.9], [0.02, 0.01]]]
  np.testing.assert_allclose(feddiv.aggregate_filters(filters, [1, 3]),
                             [[0.5, 0.5], [0.25, 0.825], [0.01375, 0.010625]])


def test_the_split_takes_the_smaller_mean_component_and_the_initial_filter_halves():
  # Component 1 has the smaller mean (0.2); equal weights and variances: clean below 0.5.
  noise_filter = [[0.5, 0.5], [0.8, 0.2], [0.01, 0.01]]
  split = feddiv.split([0.1, 0.45, 0.55, 0.9], noise_filter)
  np.testing.assert_array_equal(split.clean, [True, True, False, False])
  assert split.noise_level == 0.5
  split = feddiv.split([0.0, 0.3, 0.49, 0.51, 1.0], feddiv.INITIAL_FILTER)
  np.testing.assert_array_equal(split.clean, [True, True, True, False, False])
  assert split.noise_level == pytest.approx(0.4)


def test_debiasing_and_the_class_prior_by_hand():
  # p / p̂^ξ: ξ = 1: (0.5/0.8, 0.5/0.2) = (0.625, 2.5) -> (0.2, 0.8); ξ = 1/2: p̂^{-1/2}
  # = (1/0.894, 1/0.447), in the ratio 1 : 2 -> (1/3, 2/3).
  probs, prior = np.array([[0.5, 0.5]]), np.array([0.8, 0.2])
  np.testing.assert_allclose(feddiv.debiased_probabilities(probs, prior, 1.0), [[0.2, 0.8]])
  np.testing.assert_allclose(feddiv.debiased_probabilities(probs, prior, 0.5),
                             [[1 / 3, 2 / 3]])
  # Only the first example's de-biased maximum (0.9) exceeds 0.85: p̂ = 0.5·(0.5, 0.5) +
  # 0.5·(0.9, 0.1) = (0.7, 0.3); with none above it p̂ stays.
  probs = np.array([[0.9, 0.1], [0.5, 0.5]])
  debiased = np.array([[0.9, 0.1], [0.6, 0.4]])
  np.testing.assert_allclose(feddiv.update_prior(probs, debiased, [0.5, 0.5], 0.5),
                             [0.7, 0.3])
  np.testing.assert_allclose(feddiv.update_prior(probs, debiased * 0.9, [0.5, 0.5], 0.5),
                             [0.5, 0.5])


# Six examples: labels, the global model's argmax ŷ (largest probability), the split, the
# de-biased labels. ŷ = de-biased at 0, 2, 3, 4: the sampler keeps clean 0 and 2 (not 1);
# of the noisy 3, 4, 5 those with ŷ = de-biased and max > confidence are relabelled: 3 at
# confidence 0.5 (4's max 0.4 is not above it, 5 disagrees), 3 and 4 at 0.
_LABELS = np.array([0, 1, 2, 0, 1, 2])
_PSEUDO, _MAX = [0, 1, 0, 2, 1, 2], [0.9, 0.8, 0.6, 0.7, 0.4, 0.9]
_PROBS = np.full((6, 3), 0.0)
for _i, (_c, _p) in enumerate(zip(_PSEUDO, _MAX)):
  _PROBS[_i] = (1 - _p) / 2
  _PROBS[_i, _c] = _p
_CLEAN = np.array([True, True, True, False, False, False])
_DEBIASED = np.array([0, 2, 0, 2, 1, 0])


def _select(level, visits, confidence=0.5):
  return feddiv.select(_LABELS, _PROBS, _CLEAN, level, _DEBIASED, visits,
                       confidence=confidence)


def test_selection_and_relabelling_by_hand():
  early = _select(0.5, visits=0)  # First visits: the clean set, the relabelling kept.
  np.testing.assert_array_equal(early.kept, [0, 1, 2])
  np.testing.assert_array_equal(early.labels, [0, 1, 2, 2, 1, 2])
  np.testing.assert_array_equal(early.relabelled, [3])
  np.testing.assert_array_equal(early.consistent_clean, [0, 2])
  late = _select(0.5, visits=5)  # Noise level above 0.2: sampler's clean + relabelled.
  np.testing.assert_array_equal(late.kept, [0, 2, 3])
  np.testing.assert_array_equal(_select(0.5, visits=5, confidence=0.0).kept, [0, 2, 3, 4])
  light = _select(0.15, visits=5)  # In (0.1, 0.2]: the sampler's clean set only.
  np.testing.assert_array_equal(light.kept, [0, 2])
  np.testing.assert_array_equal(light.labels, [0, 1, 2, 2, 1, 2])
  clean = _select(0.1, visits=5)  # At most 0.1: everything, labels as they are.
  np.testing.assert_array_equal(clean.kept, np.arange(6))
  np.testing.assert_array_equal(clean.labels, _LABELS)
  assert not len(clean.relabelled)
