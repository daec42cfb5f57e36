"""Noisy-client detection: the GMM vote on synthetic per-class loss vectors, and its edges."""
import collections

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import detection
from tff_noisy.ops import detection_tf


def _synthetic(num_clients=20, num_classes=10, noisy=(3, 7, 11, 12, 18), seed=0):
  """Clean clients' class losses near 0.3, noisy clients' near 1.6."""
  rng = np.random.default_rng(seed)
  losses = rng.normal(0.3, 0.05, size=(num_clients, num_classes))
  losses[list(noisy)] = rng.normal(1.6, 0.2, size=(len(noisy), num_classes))
  truth = np.zeros(num_clients, bool)
  truth[list(noisy)] = True
  return np.abs(losses), truth


def test_noisy_clients_are_recovered():
  losses, truth = _synthetic()
  np.testing.assert_array_equal(detection.detect_noisy_clients(losses), truth)
  result = detection.vote(losses)
  assert result.status == detection.OK and result.fits == 9 and result.agreeing_fits >= 5


def test_graded_noise_flags_the_high_rates():
  """Losses that grow with the client's noise rate (0..0.8): the noisiest are flagged."""
  rng = np.random.default_rng(1)
  rates = np.linspace(0.0, 0.8, 20)
  losses = 0.3 + 3.0 * rates[:, None] + rng.normal(0, 0.05, size=(20, 10))
  flags = detection.detect_noisy_clients(losses)
  report = detection.detection_report(flags, rates)
  assert report['recall_high_noise'] == 1.0
  assert report['mean_rate_flagged'] > report['mean_rate_unflagged']


def test_a_missing_class_is_filled_with_its_column_minimum_never_nan():
  losses, truth = _synthetic()
  losses[4, 2] = np.nan  # Client 4 has no sample of class 2; so do 3 and 7 of class 9.
  losses[[3, 7], 9] = np.nan
  filled = detection.fill_missing(losses)
  assert not np.isnan(filled).any()
  assert filled[4, 2] == np.nanmin(losses[:, 2])
  assert filled[3, 9] == filled[7, 9] == np.nanmin(losses[:, 9])
  assert np.all(np.isfinite(detection.minmax_columns(filled)))
  flags = detection.detect_noisy_clients(losses)
  assert flags.dtype == bool and flags.shape == (20,)
  assert flags[[11, 12, 18]].all() and not flags[[0, 1, 2, 4]].any()


def test_a_class_no_client_has_becomes_zero_and_a_constant_column_zero():
  losses = np.array([[0.1, np.nan, 2.0], [0.5, np.nan, 2.0], [0.3, np.nan, 2.0]])
  filled = detection.fill_missing(losses)
  np.testing.assert_array_equal(filled[:, 1], 0.0)
  scaled = detection.minmax_columns(filled)
  np.testing.assert_allclose(scaled[:, 0], [0.0, 1.0, 0.5])
  np.testing.assert_array_equal(scaled[:, 1:], 0.0)


def test_fewer_than_two_clients_skip_detection():
  result = detection.vote(np.array([[0.2, 0.4]]))
  assert result.status == detection.TOO_FEW_CLIENTS and not result.noisy.any()
  assert detection.vote(np.zeros((0, 3))).noisy.shape == (0,)


def test_identical_clients_are_all_clean():
  result = detection.vote(np.ones((4, 3)))
  assert result.status == detection.IDENTICAL_CLIENTS and not result.noisy.any()


def test_one_side_empty_means_no_noisy_client(monkeypatch):
  monkeypatch.setattr(detection, 'gmm_partition', lambda features, seed: np.ones(5, bool))
  result = detection.vote(np.random.default_rng(0).random((5, 3)))
  assert result.status == detection.ONE_SIDE_EMPTY and not result.noisy.any()


def test_the_majority_partition_is_kept_and_a_tie_goes_to_the_first(monkeypatch):
  a, b = np.array([1, 0, 0, 0], bool), np.array([1, 1, 0, 0], bool)
  picks = {seed: (a if seed in (0, 5, 6) else b) for seed in range(9)}
  monkeypatch.setattr(detection, 'gmm_partition', lambda features, seed: picks[seed])
  features = np.random.default_rng(0).random((4, 3))
  result = detection.vote(features)
  np.testing.assert_array_equal(result.noisy, b)
  assert result.agreeing_fits == 6
  picks = {seed: (b if seed % 2 else a) for seed in range(4)}  # 2 - 2: seed 0's wins.
  np.testing.assert_array_equal(detection.vote(features, fits=4).noisy, a)


def test_noisy_side_is_the_component_with_the_larger_mean_sum():
  losses, truth = _synthetic(seed=3)
  features = detection.minmax_columns(detection.fill_missing(losses))
  for seed in range(3):
    np.testing.assert_array_equal(detection.gmm_partition(features, seed), truth)


def test_class_mean_losses_twins_agree():
  rng = np.random.default_rng(2)
  x = rng.normal(size=(37, 5)).astype(np.float32)
  y = rng.integers(0, 4, 37)
  y[y == 3] = 0  # Class 3 absent: NaN.
  weights = rng.normal(size=(5, 4)).astype(np.float32)
  logits = x @ weights
  shifted = logits - logits.max(axis=1, keepdims=True)
  ce = -(shifted[np.arange(37), y] - np.log(np.exp(shifted).sum(axis=1)))
  expected = detection.class_mean_losses(ce, y, 4)
  assert np.isnan(expected[3]) and not np.isnan(expected[:3]).any()
  dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=x, y=y.astype(np.int64))).batch(8)
  got = detection_tf.class_mean_losses(lambda inputs: inputs @ weights, dataset, 4).numpy()
  np.testing.assert_allclose(got, expected, rtol=1e-5, equal_nan=True)


def test_report_against_the_true_rates():
  report = detection.detection_report([True, True, False, False, True],
                                      [0.0, 0.6, 0.2, 0.0, 0.9])
  assert report['precision'] == pytest.approx(2 / 3) and report['recall'] == pytest.approx(2 / 3)
  assert report['precision_high_noise'] == pytest.approx(2 / 3)
  assert report['recall_high_noise'] == 1.0
  assert report['mean_rate_flagged'] == pytest.approx(0.5)
  assert report['mean_rate_unflagged'] == pytest.approx(0.1)
  empty = detection.detection_report([False, False], [0.0, 0.0])
  assert empty['precision'] is None and empty['recall'] is None
  assert empty['mean_rate_flagged'] is None


def test_inf_losses_are_refused():
  with pytest.raises(ValueError, match='finite or NaN'):
    detection.vote(np.array([[np.inf, 0.1], [0.2, 0.3]]))
