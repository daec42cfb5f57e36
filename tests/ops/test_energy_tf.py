"""The TensorFlow twins of the NA-FedAvg steps equal the NumPy ones."""
import numpy as np
import pytest

from tff_noisy.ops import energy
from tff_noisy.ops import energy_tf


def test_twins_agree():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(500, 10)).astype(np.float32) * 3
  scores = energy.energy_score(logits, 2.0)
  np.testing.assert_allclose(energy_tf.energy_score(logits, 2.0).numpy(), scores, rtol=1e-5)
  edges = np.linspace(-5.0, 15.0, 401)
  counts = energy.score_histogram(scores, edges)
  tf_counts = energy_tf.score_histogram(scores, -5.0, 15.0, 400).numpy()
  assert np.abs(tf_counts - counts).sum() <= 2  # Float rounding at a bin boundary at most.
  tau = energy.threshold_from_histograms(counts, edges, 75.0)
  assert energy_tf.threshold_from_histogram(counts, -5.0, 15.0, 75.0).numpy() == pytest.approx(
      tau, abs=1e-9)
  assert energy_tf.noise_estimate(scores, tau).numpy() == pytest.approx(
      energy.noise_estimate(scores, tau))
