"""Co-teaching+ (Yu et al. 2019, Algorithm 1): the disagreement set, the kept count in
float32, the cross-update on it by hand (on logits and, as the released codes, on
probabilities), the empty and too-small disagreement sets, ties, the phase switch, and
the TensorFlow twin against NumPy."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import coteaching
from tff_noisy.ops import coteaching_plus as ctp
from tff_noisy.ops import coteaching_plus_tf as ctp_tf


def _two_class(a):
  """Logits (a_j, 0): with label 0, CE = log(1 + e^(-a_j)); the prediction is 0 iff a_j >= 0."""
  return np.stack([np.asarray(a, np.float64), np.zeros(len(a))], axis=1)


# Labels all 0. f predicts (0, 1, 0, 1, 0), g predicts (1, 1, 0, 0, 0): D = {0, 3}.
_LABELS = np.zeros(5, np.int64)
_F = _two_class([2.0, -1.0, 1.0, -2.0, 3.0])
_G = _two_class([-1.0, -3.0, 2.0, 1.0, 4.0])


def test_disagreement_mask_and_first_class_on_a_tie():
  np.testing.assert_array_equal(ctp.disagreement_mask(_F, _G), [1, 0, 0, 1, 0])
  tied = np.array([[1.0, 1.0], [0.0, 2.0]])
  np.testing.assert_array_equal(ctp.predictions(tied), [0, 1])
  np.testing.assert_array_equal(ctp_tf.predictions(tf.constant(tied, tf.float32)), [0, 1])


def test_kept_count_floors_in_float32():
  assert ctp.kept_count(5, 0.2) == 4
  assert ctp.kept_count(2, 0.2) == 1  # ⌊1.6⌋
  assert ctp.kept_count(1, 0.2) == 0  # ⌊0.8⌋: nothing kept
  assert ctp.kept_count(0, 0.2) == 0
  # τ = 3/65 (FNBench's ramp linspace(0, 0.2, 14), round 4) and d = 65: (1 - τ)·d = 62
  # exactly; float64 gives 61.999...→ 61 (FNBench's int()), float32 rounds to 62.
  tau = np.linspace(0.0, 0.2, 14)[3]
  assert math.floor((1 - tau) * 65) == 61
  assert ctp.kept_count(65, tau) == 62
  rates = np.concatenate([np.linspace(0.0, 0.2, 24), [0.1, 0.3, 0.5, 0.8]])
  for rate in rates:
    sizes = np.arange(0, 300)
    got = ctp_tf.kept_count(tf.constant(sizes), tf.constant(rate, tf.float32)).numpy()
    np.testing.assert_array_equal(got, [ctp.kept_count(d, rate) for d in sizes])


def test_cross_update_on_the_disagreement_set_by_hand():
  # d = 2, n = ⌊0.8·2⌋ = 1. On D, CE_f = (log(1+e^-2), log(1+e^2)): f keeps example 0;
  # CE_g = (log(1+e), log(1+e^-1)): g keeps example 3. f steps on example 3, g on 0:
  # ℓ_0 = 5·CE_g,0 = 5 log(1+e), ℓ_3 = 5·CE_f,3 = 5 log(1+e²), the rest 0.
  kept_f, kept_g, kept = ctp.selection(_LABELS, _F, _G, 0.2, on_probabilities=False)
  np.testing.assert_array_equal(kept_f, [1, 0, 0, 0, 0])
  np.testing.assert_array_equal(kept_g, [0, 0, 0, 1, 0])
  assert kept == 1
  got = ctp.disagreement_loss(_LABELS, _F, _G, 0.2, on_probabilities=False)
  np.testing.assert_allclose(got, [5 * np.log1p(np.e), 0, 0, 5 * np.log1p(np.e ** 2), 0])
  # The batch mean is the two networks' mean losses summed.
  assert got.mean() == pytest.approx(np.log1p(np.e ** 2) + np.log1p(np.e))


def test_on_probabilities_ranks_the_same_and_scores_softmax_of_softmax():
  # Two classes, p_0 = σ(a): CE of (p_0, p_1) as logits is log(1 + e^(p_1 - p_0)) with
  # p_1 - p_0 = -tanh(a/2): the same order as CE on logits, bounded by log(1 + e).
  kept_f, kept_g, _ = ctp.selection(_LABELS, _F, _G, 0.2)
  np.testing.assert_array_equal(kept_f, [1, 0, 0, 0, 0])
  np.testing.assert_array_equal(kept_g, [0, 0, 0, 1, 0])
  got = ctp.disagreement_loss(_LABELS, _F, _G, 0.2)
  want_0 = 5 * np.log1p(np.exp(-np.tanh(-1.0 / 2)))  # g's row 0, b = -1
  want_3 = 5 * np.log1p(np.exp(-np.tanh(-2.0 / 2)))  # f's row 3, a = -2
  np.testing.assert_allclose(got, [want_0, 0, 0, want_3, 0])
  # Certain of the wrong class: the bound log(1 + e), where CE on logits would be 50.
  np.testing.assert_allclose(ctp.ranked_cross_entropy(_LABELS, _two_class([-50.0] * 5)),
                             np.log1p(np.e))


def test_no_disagreement_trains_both_on_the_whole_batch():
  # f = g row by row: D is empty; ℓ_j = CE_f,j + CE_g,j on every example.
  got = ctp.disagreement_loss(_LABELS, _F, _F * 2, 0.2, on_probabilities=False)
  ce = np.log1p(np.exp(-_F[:, 0]))
  np.testing.assert_allclose(got, ce + np.log1p(np.exp(-2 * _F[:, 0])))
  kept_f, kept_g, kept = ctp.selection(_LABELS, _F, _F * 2, 0.2)
  assert kept_f.all() and kept_g.all() and kept == 5


def test_a_disagreement_set_too_small_to_keep_anything():
  # Only example 3 disagrees (d = 1, ⌊0.8⌋ = 0).
  g = _F.copy()
  g[3] = [1.0, 0.0]
  assert ctp.disagreement_mask(_F, g).sum() == 1
  np.testing.assert_array_equal(ctp.disagreement_loss(_LABELS, _F, g, 0.2), np.zeros(5))
  # 'all' (the authors' code's fallback): both step on example 3: ℓ_3 = 5 (CE_f,3 + CE_g,3).
  got = ctp.disagreement_loss(_LABELS, _F, g, 0.2, on_probabilities=False, none_kept='all')
  np.testing.assert_allclose(got, [0, 0, 0, 5 * (np.log1p(np.e ** 2) + np.log1p(np.e ** -1)), 0])
  with pytest.raises(ValueError, match='none_kept'):
    ctp.disagreement_loss(_LABELS, _F, g, 0.2, none_kept='nothing')


def test_ties_keep_the_earlier_example():
  # Examples 0 and 2 disagree with identical rows; n = ⌊0.5·2⌋ = 1 keeps example 0.
  f = _two_class([1.0, 1.0, 1.0])
  g = _two_class([-1.0, 1.0, -1.0])
  kept_f, kept_g, _ = ctp.selection(np.zeros(3, np.int64), f, g, 0.5)
  np.testing.assert_array_equal(kept_f, [1, 0, 0])
  np.testing.assert_array_equal(kept_g, [1, 0, 0])


def test_phase_switch_is_co_teaching_up_to_init_epoch():
  assert not ctp.disagreement_active(10, 10)
  assert ctp.disagreement_active(11, 10)
  np.testing.assert_allclose(ctp.cross_update_loss(_LABELS, _F, _G, 0.2, disagreement=False),
                             coteaching.cross_update_loss(_LABELS, _F, _G, 0.2))
  np.testing.assert_allclose(ctp.cross_update_loss(_LABELS, _F, _G, 0.2, disagreement=True),
                             ctp.disagreement_loss(_LABELS, _F, _G, 0.2))
  assert ctp.forget_rate(3, 0.2, 5) == pytest.approx(0.1)  # Co-teaching's schedule.


def test_kept_purity():
  assert ctp.kept_purity([1, 0, 1, 1], [1, 1, 0, 1]) == pytest.approx(2 / 3)
  assert math.isnan(ctp.kept_purity([0, 0], [1, 1]))


def _random_batch(rng, batch, classes, agree):
  logits_f = rng.normal(scale=2.0, size=(batch, classes))
  logits_g = rng.normal(scale=2.0, size=(batch, classes))
  logits_g[:agree] = logits_f[:agree] + 0.1  # Same predictions on the first rows.
  return rng.integers(0, classes, batch), logits_f, logits_g


@pytest.mark.parametrize('agree', [0, 5, 7, 8])  # At least this many of 8 rows agree.
@pytest.mark.parametrize('on_probabilities', [True, False])
@pytest.mark.parametrize('none_kept', ['skip', 'all'])
def test_the_tensorflow_twin_equals_numpy(agree, on_probabilities, none_kept):
  rng = np.random.default_rng(agree)
  labels, logits_f, logits_g = _random_batch(rng, 8, 4, agree)
  logits_f32, logits_g32 = logits_f.astype(np.float32), logits_g.astype(np.float32)
  for rate in (0.0, 0.2, 0.45):
    for disagreement in (True, False):
      want = ctp.cross_update_loss(labels, logits_f32, logits_g32, rate, disagreement,
                                   on_probabilities, none_kept)
      got = ctp_tf.cross_update_loss(tf.constant(labels), tf.constant(logits_f32),
                                     tf.constant(logits_g32), tf.constant(rate, tf.float32),
                                     tf.constant(disagreement), on_probabilities, none_kept)
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gradient_reaches_each_network_only_through_the_other_s_kept_examples():
  rng = np.random.default_rng(3)
  labels, logits_f, logits_g = _random_batch(rng, 10, 3, 2)
  f, g = tf.Variable(logits_f, dtype=tf.float32), tf.Variable(logits_g, dtype=tf.float32)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(ctp_tf.disagreement_loss(tf.constant(labels), f, g,
                                                   tf.constant(0.3)))
  grad_f, grad_g = tape.gradient(loss, [f, g])
  kept_f, kept_g, _ = ctp.selection(labels, logits_f.astype(np.float32),
                                    logits_g.astype(np.float32), 0.3)
  assert kept_f.sum() >= 1 and kept_g.sum() >= 1
  rows_f = np.abs(grad_f.numpy()).sum(axis=1) > 0
  rows_g = np.abs(grad_g.numpy()).sum(axis=1) > 0
  np.testing.assert_array_equal(rows_f, kept_g)
  np.testing.assert_array_equal(rows_g, kept_f)
