"""Transition-matrix estimates (FedEFC counts, Patrini anchors), prior compensation, the
forward-corrected loss (NumPy)."""

import numpy as np
import pytest

from tff_noisy.ops import transition

# Q[i, j] = p(noisy i | true j): each column sums to 1, diagonal-dominant columns.
_Q = np.array([[0.7, 0.1, 0.0, 0.2, 0.0],
               [0.1, 0.8, 0.0, 0.0, 0.3],
               [0.0, 0.1, 0.9, 0.0, 0.0],
               [0.2, 0.0, 0.1, 0.6, 0.0],
               [0.0, 0.0, 0.0, 0.2, 0.7]])


def _calibrated_sample(matrix, n, seed, logit_noise=0.0):
  """True classes, noisy labels drawn through ``matrix`` and the noisy-label posterior
  p(noisy | x) = Q[:, y(x)] of data whose classes are separable (optionally perturbed)."""
  rng = np.random.default_rng(seed)
  num_classes = len(matrix)
  y = rng.integers(0, num_classes, n)
  noisy = (np.cumsum(matrix[:, y].T, axis=1) > rng.random((n, 1))).argmax(axis=1)
  probs = matrix[:, y].T
  if logit_noise:
    logits = np.log(probs + 1e-3) + rng.normal(0.0, logit_noise, probs.shape)
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
  return probs, noisy


def test_confident_joint_by_hand():
  probs = np.array([[0.8, 0.1, 0.1],     # labelled 0: confident only in 0.
                    [0.38, 0.6, 0.02],   # labelled 0: confident only in 1.
                    [0.2, 0.7, 0.1],     # labelled 1: confident in 1.
                    [0.3, 0.4, 0.3],     # labelled 1: nothing confident, not counted.
                    [0.62, 0.0, 0.38]])  # labelled 2: 0 and 2 confident; argmax is 0.
  labels = np.array([0, 0, 1, 1, 2])
  np.testing.assert_allclose(transition.per_class_thresholds(probs, labels),
                             [0.59, 0.55, 0.38])
  expected = np.zeros((3, 3))
  expected[0, 0] = expected[0, 1] = expected[1, 1] = expected[2, 0] = 1
  np.testing.assert_array_equal(transition.confident_joint(probs, labels), expected)
  q = transition.estimate_transition_matrix(probs, labels)
  clipped = expected + np.diag([0, 0, 1])  # C_22 = 0 is clipped to 1.
  np.testing.assert_allclose(q, clipped / clipped.sum(axis=0))
  np.testing.assert_allclose(q.sum(axis=0), 1.0)


# tau = [0.8, 0.3, 0.2, +inf] (class 3: nobody labelled 3). Confident classes J(x):
# row 0 {1, 2} (global argmax 3, absent), row 1 {1, 2} (global argmax 0 fails its 0.8),
# row 2 {0}, row 3 {2} (one class: both rules take it, not the global argmax 0).
_GUESS_PROBS = np.array([[0.10, 0.30, 0.20, 0.40],   # labelled 1.
                         [0.45, 0.30, 0.20, 0.05],   # labelled 1.
                         [0.80, 0.10, 0.05, 0.05],   # labelled 0.
                         [0.50, 0.10, 0.20, 0.20]])  # labelled 2.
_GUESS_LABELS = np.array([1, 1, 0, 2])
# C[label, guess]. ``passing``: guesses 1, 1, 0, 2. ``cleanlab``: 3, 0, 0, 2.
_GUESS_COUNTS = {'passing': np.diag([1.0, 2.0, 1.0, 0.0]),
                'cleanlab': np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0],
                                      [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])}
# Diagonal clipped to >= 1, then columns normalised: ``passing`` gives the identity;
# ``cleanlab``'s column sums are 2, 1, 1, 2.
_GUESS_MATRICES = {'passing': np.eye(4),
                  'cleanlab': np.array([[0.5, 0.0, 0.0, 0.0], [0.5, 1.0, 0.0, 0.5],
                                        [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.5]])}


@pytest.mark.parametrize('guess', ['passing', 'cleanlab'])
def test_the_two_guess_rules_by_hand(guess):
  np.testing.assert_allclose(transition.per_class_thresholds(_GUESS_PROBS, _GUESS_LABELS),
                             [0.8, 0.3, 0.2, np.inf])
  np.testing.assert_array_equal(
      transition.confident_joint(_GUESS_PROBS, _GUESS_LABELS, guess), _GUESS_COUNTS[guess])
  np.testing.assert_allclose(
      transition.estimate_transition_matrix(_GUESS_PROBS, _GUESS_LABELS, guess=guess),
      _GUESS_MATRICES[guess])


def test_passing_is_the_default_guess_and_a_bad_one_raises():
  np.testing.assert_array_equal(transition.confident_joint(_GUESS_PROBS, _GUESS_LABELS),
                                _GUESS_COUNTS['passing'])
  with pytest.raises(ValueError, match="guess must be one of passing, cleanlab, got 'max'"):
    transition.confident_joint(_GUESS_PROBS, _GUESS_LABELS, 'max')


def test_absent_class_gets_an_identity_column_and_infinite_threshold():
  rng = np.random.default_rng(0)
  probs = rng.dirichlet([5.0, 5.0, 0.1], size=40)
  labels = rng.integers(0, 2, 40)  # Nobody labelled 2.
  assert transition.per_class_thresholds(probs, labels)[2] == np.inf
  q = transition.estimate_transition_matrix(probs, labels)
  np.testing.assert_array_equal(q[:, 2], [0.0, 0.0, 1.0])


def test_row_normalisation_and_bad_input():
  probs, noisy = _calibrated_sample(_Q, 500, 1)
  rows = transition.estimate_transition_matrix(probs, noisy, normalise='row')
  np.testing.assert_allclose(rows.sum(axis=1), 1.0)
  with pytest.raises(ValueError, match='normalise must be one of column, row'):
    transition.estimate_transition_matrix(probs, noisy, normalise='both')
  with pytest.raises(ValueError, match='noisy label 5 is outside'):
    transition.estimate_transition_matrix(probs, np.full(500, 5))
  with pytest.raises(ValueError, match='3 noisy labels for 500 rows'):
    transition.estimate_transition_matrix(probs, noisy[:3])


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_estimators_recover_a_known_matrix_from_calibrated_probabilities(seed):
  probs, noisy = _calibrated_sample(_Q, 5000, seed, logit_noise=0.1)
  counted = transition.estimate_transition_matrix(probs, noisy)
  assert np.abs(counted - _Q).max() <= 0.05
  # Patrini's anchors are exact on unperturbed calibrated probabilities (each column of
  # _Q also tops its row); the perturbation biases the top percentile upwards.
  exact, _ = _calibrated_sample(_Q, 5000, seed)
  assert np.abs(transition.anchor_transition_matrix(exact) - _Q).max() <= 1e-9
  assert np.abs(transition.anchor_transition_matrix(probs) - _Q).max() <= 0.06
  errors = transition.matrix_errors(counted, _Q)
  assert errors['cosine'] > 0.99 and errors['l1'] < 0.5


def test_anchor_columns_are_the_mean_distribution_of_the_top_percentile():
  rng = np.random.default_rng(3)
  probs = rng.dirichlet(np.ones(4), size=200)
  q = transition.anchor_transition_matrix(probs, 90.0)
  for j in range(4):
    top = probs[probs[:, j] >= np.percentile(probs[:, j], 90.0)]
    np.testing.assert_allclose(q[:, j], top.mean(axis=0))
  np.testing.assert_allclose(q.sum(axis=0), 1.0)
  with pytest.raises(ValueError, match=r'percentile must be in \(0, 100\]'):
    transition.anchor_transition_matrix(probs, 0.0)


def test_prior_compensation_by_hand():
  q = np.array([[0.8, 0.3], [0.2, 0.7]])
  prior = np.array([0.25, 0.75])
  w = q * prior[:, None] / (q * prior[:, None]).sum(axis=0)
  np.testing.assert_allclose(transition.compensate_prior(q, prior), w.T)
  # A locally absent label weighs 0 and nothing is renormalised.
  absent = transition.compensate_prior(np.array([[1.0, 0.0], [0.0, 1.0]]), [1.0, 0.0])
  np.testing.assert_array_equal(absent, [[1.0, 0.0], [0.0, 0.0]])
  np.testing.assert_allclose(transition.class_prior([0, 1, 1, 1], 3), [0.25, 0.75, 0.0])


def test_forward_loss_by_hand_and_identity_is_cross_entropy():
  logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
  labels = np.array([0, 2])
  probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
  ce = -np.log(probs[[0, 1], labels])
  np.testing.assert_allclose(
      transition.forward_corrected_cross_entropy(labels, logits, np.eye(3)), ce, rtol=1e-9)
  q = np.array([[0.6, 0.2, 0.0], [0.4, 0.8, 0.1], [0.0, 0.0, 0.9]])
  expected = -np.log((probs @ q.T)[[0, 1], labels] + 1e-12)
  np.testing.assert_allclose(transition.forward_corrected_cross_entropy(labels, logits, q),
                             expected)


def test_singularity_and_matrix_errors():
  assert not transition.is_singular(_Q)
  assert transition.is_singular([[0.5, 0.5], [0.5, 0.5]])
  errors = transition.matrix_errors([[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]])
  assert errors == {'l1': 4.0, 'cosine': 0.0}
  report = transition.matrix_error_report({'a': np.eye(2), 'b': np.ones((2, 2)) / 2},
                                          {'a': np.eye(2), 'b': np.eye(2)})
  assert report['per_client']['a'] == {'l1': 0.0, 'cosine': pytest.approx(1.0)}
  assert report['mean_l1'] == pytest.approx(1.0)
  assert report['mean_cosine'] == pytest.approx((1.0 + 1 / np.sqrt(2)) / 2)
