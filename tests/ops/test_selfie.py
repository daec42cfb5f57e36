"""SELFIE (Song et al. 2019, Algorithm 1): the history ring buffer, the history's label
distribution and normalised entropy by hand (with and without counting unwritten slots),
the sticky refurbished labels, the clean count, the loss over clean ∪ refurbished, one
client step in and after warm-up, and the TensorFlow twin against NumPy."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import selfie
from tff_noisy.ops import selfie_tf

_LOG1P = np.log1p


def test_init_state_and_the_ring_buffer():
  history, count, refurbished = selfie.init_state(4, 3)
  assert history.shape == (4, 3) and history.dtype == np.int32 and not history.any()
  np.testing.assert_array_equal(refurbished, [-1, -1, -1, -1])
  # Counts 0, 2, 3, 5 write slots 0, 2, 0, 2.
  count = np.array([0, 2, 3, 5], np.int32)
  new, new_count = selfie.update_history(history, count, [4, 5, 6, 7])
  np.testing.assert_array_equal(new, [[4, 0, 0], [0, 0, 5], [6, 0, 0], [0, 0, 7]])
  np.testing.assert_array_equal(new_count, [1, 3, 4, 6])
  assert not history.any()  # The input is left alone.
  got, got_count = selfie_tf.update_history(tf.constant(history), tf.constant(count),
                                            tf.constant([4, 5, 6, 7]))
  np.testing.assert_array_equal(got, new)
  np.testing.assert_array_equal(got_count, new_count)


# C = 4, q = 4.
_HISTORY = np.array([[2, 2, 2, 2], [1, 1, 3, 3], [3, 0, 0, 0], [0, 0, 0, 0]], np.int32)
_COUNT = np.array([4, 4, 1, 0], np.int32)


def test_uncertainty_and_mode_by_hand():
  # Row 0: P = (0, 0, 1, 0), F = 0, mode 2. Row 1: P = (0, 1/2, 0, 1/2), F = log 2 / log 4
  # = 1/2, mode 1 (tie: the smaller). Row 2, one prediction (3) and three unwritten slots
  # read as class 0: P = (3/4, 0, 0, 1/4), F = -(3/4 log 3/4 + 1/4 log 1/4) / log 4. Row 3:
  # nothing written, all slots class 0: F = 0.
  f_row2 = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25)) / np.log(4)
  np.testing.assert_allclose(selfie.label_distribution(_HISTORY, _COUNT, 4)[2],
                             [0.75, 0, 0, 0.25])
  np.testing.assert_allclose(selfie.uncertainty(_HISTORY, _COUNT, 4), [0, 0.5, f_row2, 0],
                             atol=1e-12)
  np.testing.assert_array_equal(selfie.history_mode(_HISTORY, _COUNT, 4), [2, 1, 0, 0])
  # Counting only the written slots (the paper's |H_x(q)|): row 2 is P = (0, 0, 0, 1), F = 0,
  # mode 3; row 3 has no vote: F = 1.
  np.testing.assert_allclose(
      selfie.uncertainty(_HISTORY, _COUNT, 4, count_empty_slots=False), [0, 0.5, 0, 1],
      atol=1e-12)
  np.testing.assert_array_equal(
      selfie.history_mode(_HISTORY, _COUNT, 4, count_empty_slots=False), [2, 1, 3, 0])
  with pytest.raises(ValueError, match='num_classes'):
    selfie.uncertainty(_HISTORY, _COUNT, 1)


def test_fnbench_defaults_refurbish_only_unanimous_histories():
  # q = 15, C = 10, ε = 0.05: 14 votes against 1 give
  # F = -(14/15 log 14/15 + 1/15 log 1/15) / log 10 ≈ 0.106 > 0.05.
  history = np.array([[3] * 15, [3] * 14 + [4]], np.int32)
  f = selfie.uncertainty(history, [15, 15], 10)
  want = -(14 / 15 * np.log(14 / 15) + 1 / 15 * np.log(1 / 15)) / np.log(10)
  np.testing.assert_allclose(f, [0, want], atol=1e-12)
  assert want == pytest.approx(0.1064, abs=1e-4)
  np.testing.assert_array_equal(selfie.refurbish(history, [15, 15], [-1, -1], 10, 0.05),
                                [3, -1])


def test_refurbished_labels_are_sticky_and_need_a_written_history():
  # Row 0 (F = 0, mode 2) is refurbished; row 1 (F = 1/2) keeps its earlier 3; row 2 with
  # empty slots counted is F ≈ 0.41 > 0.3: keeps -1; row 3 (F = 0 but nothing written)
  # stays -1.
  got = selfie.refurbish(_HISTORY, _COUNT, [-1, 3, -1, -1], 4, 0.3)
  np.testing.assert_array_equal(got, [2, 3, -1, -1])
  # A new refurbishable mode replaces an old label.
  np.testing.assert_array_equal(selfie.refurbish(_HISTORY[:1], _COUNT[:1], [1], 4, 0.3), [2])
  got_tf = selfie_tf.refurbish(tf.constant(_HISTORY), tf.constant(_COUNT),
                               tf.constant([-1, 3, -1, -1]), 4, 0.3)
  np.testing.assert_array_equal(got_tf, got)


def test_clean_count_in_float64_as_fnbench():
  assert selfie.num_clean(64, 0.2) == 52  # ⌈51.2⌉
  assert selfie.num_clean(5, 0.2) == 4
  # (1 - 0.4)·25 = 15 exactly: float64 gives 15, float32 arithmetic would give 16.
  assert selfie.num_clean(25, 0.4) == 15
  assert int(np.ceil((np.float32(1) - np.float32(0.4)) * np.float32(25))) == 16
  sizes = np.arange(1, 2049)
  for rate in (0.2, 0.4, 0.45):
    got = selfie_tf.num_clean(tf.constant(sizes), rate).numpy()
    np.testing.assert_array_equal(got, [math.ceil(b * (1.0 - rate)) for b in sizes])


def test_mask_and_targets_by_hand():
  # B = 5, τ = 0.4: ⌈3⌉ = 3 clean. Losses order: 2 (0.1), then 0, 3, 4 tied at 0.5 (0 and 3
  # kept, the earlier), 1. Refurbished: example 1 (not clean) to 1, example 2 (clean) to 2.
  losses = np.array([0.5, 2.0, 0.1, 0.5, 0.5])
  labels = np.array([0, 0, 1, 3, 3])
  mask, targets = selfie.loss_mask_and_targets(labels, losses, [-1, 1, 2, -1, -1], 0.4)
  np.testing.assert_array_equal(mask, [1, 1, 1, 1, 0])
  np.testing.assert_array_equal(targets, [0, 1, 2, 3, 3])
  mask_tf, targets_tf = selfie_tf.loss_mask_and_targets(
      tf.constant(labels), tf.constant(losses, tf.float32), tf.constant([-1, 1, 2, -1, -1]),
      0.4)
  np.testing.assert_array_equal(mask_tf, mask)
  np.testing.assert_array_equal(targets_tf, targets)


def test_selfie_loss_by_hand():
  # Logits (a_j, 0), labels 0: CE = log(1 + e^-a). a = (3, 1, -1, -2), τ = 0.5: clean {0, 1};
  # example 3 refurbished to 1: CE(z_3, 1) = log(1 + e^a_3) = log(1 + e^-2). k = 3, B = 4.
  logits = np.stack([[3.0, 1.0, -1.0, -2.0], np.zeros(4)], axis=1)
  got = selfie.selfie_loss(np.zeros(4, np.int64), logits, [-1, -1, -1, 1], 0.5)
  want = 4 / 3 * np.array([_LOG1P(np.exp(-3)), _LOG1P(np.exp(-1)), 0, _LOG1P(np.exp(-2))])
  np.testing.assert_allclose(got, want)
  # Its mean is the mean cross-entropy over the 3 kept examples.
  assert got.mean() == pytest.approx(
      (_LOG1P(np.exp(-3)) + _LOG1P(np.exp(-1)) + _LOG1P(np.exp(-2))) / 3)


def test_one_client_step_in_and_after_warm_up():
  # C = 2, q = 2. Predictions (1, 0) go to slot 1: histories (1, 1) and (1, 0). Row 0:
  # F = 0 → refurbished to 1; row 1: F = 1. τ = 0.5: 1 clean, row 1 (CE log(1 + e^-2)
  # against row 0's log(1 + e^2)). Both kept: ℓ = (CE(z_0, 1), CE(z_1, 0)) = log(1 + e^-2) each.
  labels = np.array([0, 0])
  logits = np.array([[0.0, 2.0], [2.0, 0.0]])
  history = np.array([[1, 0], [1, 0]], np.int32)
  count = np.array([1, 1], np.int32)
  args = (labels, logits, history, count, [-1, -1], 2, 0.05, 0.5)
  loss, new_history, new_count, refurbished = selfie.client_step(*args, active=True)
  np.testing.assert_allclose(loss, [_LOG1P(np.exp(-2))] * 2)
  np.testing.assert_array_equal(new_history, [[1, 1], [1, 0]])
  np.testing.assert_array_equal(new_count, [2, 2])
  np.testing.assert_array_equal(refurbished, [1, -1])
  # Warm-up: plain cross-entropy against the observed labels; the history still fills.
  loss, new_history, _, refurbished = selfie.client_step(*args, active=False)
  np.testing.assert_allclose(loss, [_LOG1P(np.exp(2)), _LOG1P(np.exp(-2))])
  np.testing.assert_array_equal(new_history, [[1, 1], [1, 0]])
  np.testing.assert_array_equal(refurbished, [-1, -1])
  assert not selfie.refurbishing_active(24, 24) and selfie.refurbishing_active(25, 24)


@pytest.mark.parametrize('count_empty_slots', [True, False])
@pytest.mark.parametrize('active', [True, False])
def test_the_tensorflow_twin_equals_numpy(count_empty_slots, active):
  rng = np.random.default_rng(int(count_empty_slots) + 2 * int(active))
  batch, queue, classes = 12, 5, 3
  # Histories concentrated on few classes so that some rows pass each threshold.
  history = rng.choice([0, 1, 1, 1, 2], size=(batch, queue)).astype(np.int32)
  history[:3] = 2
  count = rng.integers(0, 2 * queue, batch).astype(np.int32)
  refurbished = rng.integers(-1, classes, batch).astype(np.int32)
  labels = rng.integers(0, classes, batch)
  logits = rng.normal(scale=2.0, size=(batch, classes)).astype(np.float32)
  np.testing.assert_allclose(
      selfie_tf.uncertainty(tf.constant(history), tf.constant(count), classes,
                            count_empty_slots),
      selfie.uncertainty(history, count, classes, count_empty_slots), rtol=1e-6, atol=1e-6)
  for threshold in (0.05, 0.5):  # Uncertainties here: 0, 0.46, 0.51, 0.61, ...; none near either.
    want = selfie.client_step(labels, logits, history, count, refurbished, classes, threshold,
                              0.3, active, count_empty_slots)
    got = selfie_tf.client_step(tf.constant(labels), tf.constant(logits), tf.constant(history),
                                tf.constant(count), tf.constant(refurbished), classes,
                                threshold, 0.3, tf.constant(active), count_empty_slots)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    for got_part, want_part in zip(got[1:], want[1:]):
      np.testing.assert_array_equal(got_part, want_part)


def test_no_gradient_reaches_examples_outside_clean_and_refurbished():
  logits = tf.Variable([[3.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-2.0, 0.0]])
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(selfie_tf.selfie_loss(tf.zeros(4, tf.int32), logits,
                                                tf.constant([-1, -1, -1, 1]), 0.5))
  rows = np.abs(tape.gradient(loss, logits).numpy()).sum(axis=1) > 0
  np.testing.assert_array_equal(rows, [1, 1, 0, 1])


def test_refurbish_report():
  # Refurbished: examples 0 (to 2, true 2), 1 (to 0, true 1); flipped: 0 and 3.
  report = selfie.refurbish_report([2, 0, -1, -1], true_labels=[2, 1, 1, 0],
                                   observed_labels=[1, 1, 1, 2])
  assert report == {'refurbished': 2, 'precision': 0.5, 'flips_corrected': 0.5}
