"""Dawid-Skene EM: recovery of known annotators, monotone likelihood, federated = central."""

import numpy as np
import pytest

from tff_noisy.ops import dawid_skene as ds

J, N, C = 10, 2000, 10


def _confusions(rng, num_clients=J, low=0.5, high=0.9):
  """Random diagonally dominant confusion matrices: accuracy per class in [low, high]."""
  diagonal = rng.uniform(low, high, (num_clients, C))
  off = rng.dirichlet(np.ones(C - 1), (num_clients, C)) * (1 - diagonal)[..., None]
  confusion = np.zeros((num_clients, C, C))
  eye = np.eye(C, dtype=bool)
  confusion[:, eye] = diagonal
  confusion[:, ~eye] = off.reshape(num_clients, -1)
  return confusion


def _annotate(rng, confusion, truth):
  """Client j labels sample i by drawing from row truth[i] of its confusion matrix."""
  cumulative = np.cumsum(confusion[:, truth], axis=-1)  # [J, N, C]
  draws = rng.random(cumulative.shape[:2])[..., None]
  return np.minimum((draws > cumulative).sum(-1), C - 1)


def _empirical(predictions, truth):
  """Each client's confusion matrix measured against the true labels."""
  counts = np.zeros((len(predictions), C, C))
  for j, labels in enumerate(predictions):
    np.add.at(counts[j], (truth, labels), 1)
  return counts / counts.sum(-1, keepdims=True)


@pytest.fixture(scope='module')
def synthetic():
  rng = np.random.default_rng(0)
  truth = rng.integers(0, C, N)
  confusion = _confusions(rng)
  predictions = _annotate(rng, confusion, truth)
  return truth, confusion, predictions, ds.dawid_skene(predictions, C)


def test_recovers_known_confusion_matrices(synthetic):
  truth, confusion, predictions, result = synthetic
  assert result.confusion.shape == (J, C, C) and result.posteriors.shape == (N, C)
  np.testing.assert_allclose(result.confusion.sum(-1), 1.0, atol=1e-9)
  # What EM can recover from 2,000 samples is each client's empirical confusion.
  assert np.abs(result.confusion - _empirical(predictions, truth)).max() <= 0.02
  # Reliabilities (mean diagonals) match the generating matrices (to about 0.03).
  assert np.abs(result.reliability - ds.client_reliability(confusion)).max() <= 0.03
  assert np.mean(result.posteriors.argmax(1) == truth) > 0.99
  np.testing.assert_allclose(result.priors, np.bincount(truth) / N, atol=0.01)


def test_log_likelihood_never_decreases(synthetic):
  *_, predictions, _ = synthetic
  for prior in (True, False):
    result = ds.dawid_skene(predictions[:, :300], C, max_iter=60, tol=0, prior=prior)
    assert result.iterations == 60
    assert np.all(np.diff(result.log_likelihood) >= -1e-9 * abs(result.log_likelihood[0]))


def test_stops_when_posteriors_settle(synthetic):
  *_, predictions, _ = synthetic
  result = ds.dawid_skene(predictions, C, tol=1e-5)
  assert 1 < result.iterations < 500
  assert len(result.log_likelihood) == result.iterations


def test_permuting_clients_permutes_reliabilities(synthetic):
  *_, predictions, result = synthetic
  order = np.random.default_rng(1).permutation(J)
  permuted = ds.dawid_skene(predictions[order], C)
  np.testing.assert_allclose(permuted.reliability, result.reliability[order], atol=1e-9)
  np.testing.assert_allclose(permuted.posteriors, result.posteriors, atol=1e-9)


def test_client_predicting_a_permutation_of_the_truth_is_unreliable(synthetic):
  truth, _, predictions, _ = synthetic
  shifted = (truth + 1) % C  # Always wrong, though perfectly informative.
  result = ds.dawid_skene(np.vstack([predictions, shifted]), C)
  assert result.reliability[-1] < 0.05
  assert result.reliability[:-1].min() > 0.5


def test_smoothing_keeps_every_entry_positive(synthetic):
  *_, predictions, _ = synthetic
  result = ds.dawid_skene(predictions[:, :50], C, max_iter=5, smoothing=1.0)
  assert result.confusion.min() > 0


def federated_dawid_skene_reference(predictions_per_client, num_classes, max_iter,
                                    prior=True, smoothing=0.0):
  """A federated EM: the server sees only sums of the clients' local results."""
  posteriors = ds.majority_vote_posteriors(
      sum(ds.majority_vote_init_counts(p, num_classes) for p in predictions_per_client))
  for _ in range(max_iter):
    confusion = [ds.local_m_step(p, posteriors, num_classes, smoothing)
                 for p in predictions_per_client]
    terms = sum(ds.local_log_likelihood_terms(p, m)
                for p, m in zip(predictions_per_client, confusion))
    posteriors, _ = ds.e_step_from_terms(terms, ds.class_log_prior(posteriors, prior))
  return np.array(confusion), posteriors


@pytest.mark.parametrize('prior, smoothing', [(True, 0.0), (False, 0.5)])
def test_federated_em_equals_centralised(synthetic, prior, smoothing):
  *_, predictions, _ = synthetic
  predictions = predictions[:, :500]
  confusion, posteriors = federated_dawid_skene_reference(
      list(predictions), C, max_iter=20, prior=prior, smoothing=smoothing)
  result = ds.dawid_skene(predictions, C, max_iter=20, tol=0, prior=prior,
                          smoothing=smoothing)
  np.testing.assert_allclose(result.confusion, confusion, atol=1e-6)
  np.testing.assert_allclose(result.posteriors, posteriors, atol=1e-6)


def test_local_steps_shapes():
  predictions = np.array([0, 1, 1, 2])
  counts = ds.majority_vote_init_counts(predictions, 3)
  np.testing.assert_array_equal(counts, np.eye(3)[predictions])
  confusion = ds.local_m_step(predictions, counts, 3)
  np.testing.assert_allclose(confusion, np.eye(3))
  terms = ds.local_log_likelihood_terms(predictions, confusion)
  np.testing.assert_allclose(terms, np.log(np.eye(3)[predictions] + 1e-10))


def test_reliability_weights():
  weights = ds.reliability_weights([0.9, 0.3, 0.0])
  np.testing.assert_allclose(weights, [0.75, 0.25, 0.0])
  assert weights.sum() == pytest.approx(1.0)
  np.testing.assert_allclose(ds.reliability_weights([0.0, 0.0, 0.0, 0.0]), 0.25)
  with pytest.raises(ValueError, match='non-negative'):
    ds.reliability_weights([0.5, -0.1])


@pytest.mark.parametrize('predictions, match', [
    (np.array([[0, 1, 10]]), r'prediction 10 .* \[0, 10\)'),
    (np.array([[0, -1, 2]]), r'prediction -1 .* \[0, 10\)'),
    (np.zeros((3, 0), dtype=int), 'public set has size 0'),
    (np.zeros((0, 5), dtype=int), 'J >= 1'),
    (np.zeros(5, dtype=int), 'J >= 1'),
    (np.zeros((2, 5)), 'integer'),
])
def test_invalid_predictions(predictions, match):
  with pytest.raises(ValueError, match=match):
    ds.dawid_skene(predictions, C)


def test_tensorflow_client_steps_equal_numpy_ones():
  from tff_noisy.ops import dawid_skene_tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(7)
  predictions = rng.integers(0, 4, 50)
  posteriors = rng.dirichlet(np.ones(4), 50)
  confusion = ds.local_m_step(predictions, posteriors, 4, smoothing=0.5)
  np.testing.assert_allclose(
      dawid_skene_tf.local_m_step(predictions, posteriors, 0.5).numpy(), confusion, atol=1e-12)
  np.testing.assert_allclose(
      dawid_skene_tf.local_log_likelihood_terms(predictions, confusion).numpy(),
      ds.local_log_likelihood_terms(predictions, confusion), atol=1e-12)
  assert dawid_skene_tf.client_reliability(confusion).numpy() == pytest.approx(
      ds.client_reliability(confusion))
