"""Confident Learning on one client: planted label errors are found."""
import numpy as np
import pytest

from tff_noisy.ops import confident_learning


def _toy(n=400, classes=4, flipped=0.1, seed=0, spread=0.6):
  """Well-separated Gaussian classes in 8 dimensions with ``flipped`` labels planted."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(scale=3.0, size=(classes, 8))
  truth = rng.integers(0, classes, n)
  x = centres[truth] + rng.normal(scale=spread, size=(n, 8))
  labels = truth.copy()
  planted = rng.permutation(n)[:int(flipped * n)]
  labels[planted] = (truth[planted] + rng.integers(1, classes, len(planted))) % classes
  return x, labels, labels != truth


def test_planted_label_errors_are_found_with_precision_and_recall_above_0_8():
  x, labels, wrong = _toy()
  flags = confident_learning.client_label_issues(x, labels, num_classes=4, seed=0)
  recall = (flags & wrong).sum() / wrong.sum()
  precision = (flags & wrong).sum() / max(flags.sum(), 1)
  assert recall >= 0.8 and precision >= 0.8, (recall, precision)
  again = confident_learning.client_label_issues(x, labels, num_classes=4, seed=0)
  np.testing.assert_array_equal(flags, again)  # Deterministic.


def test_probabilities_are_out_of_sample_distributions_over_every_class():
  x, labels, _ = _toy(n=60, classes=3)
  probs = confident_learning.out_of_sample_probabilities(x, labels, num_classes=5, folds=3)
  assert probs.shape == (60, 5)
  np.testing.assert_allclose(probs.sum(axis=1), 1.0)
  assert np.all(probs[:, 3:] == 0)  # Classes the client lacks.


@pytest.mark.parametrize('labels', [np.zeros(20, int), np.array([0, 1, 0])])
def test_one_class_or_too_few_examples_flag_nothing(labels):
  x = np.random.default_rng(0).normal(size=(len(labels), 4))
  assert not confident_learning.client_label_issues(x, labels, num_classes=3).any()


def test_a_rare_class_uses_plain_folds():
  x, labels, _ = _toy(n=50, classes=3)
  labels[0] = 2
  labels[labels == 2] = 1
  labels[0] = 2  # Class 2 has a single example: no stratified 5 folds.
  flags = confident_learning.client_label_issues(x, labels, num_classes=3)
  assert flags.shape == (50,)
