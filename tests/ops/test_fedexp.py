"""FedExP (Jhunjhunwala et al. 2023, Eqs. 8-10): the server step size and update by hand,
uniform and weighted, FNBench's initial-model anchor by hand and through ``reanchor``, the
averaged iterate and the code's decayed ε."""
import numpy as np
import pytest

from tff_noisy.ops import fedexp

E = np.eye(3)


def test_step_size_of_orthogonal_updates_by_hand():
  # Δ_i = e_1, e_2, e_3 (M = 3): Σ||Δ_i||² = 3, Δ̄ = (1/3)(1, 1, 1), ||Δ̄||² = 1/3.
  # Paper: 3 / (2·3·(1/3 + ε)): ε = 0 gives 1.5; ε = 1e-3 gives 1 / (2/3 + 0.002).
  mean_sq, mean = fedexp.update_statistics([[E[0]], [E[1]], [E[2]]])
  assert mean_sq == pytest.approx(1.0)
  np.testing.assert_allclose(mean[0], [1 / 3] * 3)
  assert fedexp.step_size(mean_sq, 1 / 3, 0.0) == pytest.approx(1.5)
  assert fedexp.step_size(mean_sq, 1 / 3) == pytest.approx(1 / (2 / 3 + 0.002))
  assert fedexp.step_size(mean_sq, 1 / 3) == pytest.approx(3 / (2 * 3 * (1 / 3 + 1e-3)))


def test_identical_updates_are_not_extrapolated():
  # Δ_i = d for all i: ||d||² / (2(||d||² + ε)) < 1, so η_g = 1 and θ^t = θ^{t-1} + d.
  d = np.array([0.5, -2.0])
  model, eta = fedexp.server_update([np.zeros(2)], [[d], [d], [d]])
  assert eta == 1.0
  np.testing.assert_allclose(model[0], d)
  assert fedexp.step_size(0.0, 0.0, 0.0) == 1.0


def test_weighted_server_update_by_hand():
  # Weights (1, 1, 2): p = (1/4, 1/4, 1/2); Δ_i = 2e_i: Σ p_i ||Δ_i||² = 4,
  # Δ̄ = (0.5, 0.5, 1), ||Δ̄||² = 1.5; ε = 0.25: η = 4 / (2·1.75) = 8/7.
  # θ^t = (1, 1, 1) + (8/7)(0.5, 0.5, 1) = (1 + 4/7, 1 + 4/7, 1 + 8/7).
  reference = [np.ones(3)]
  trained = [[np.ones(3) + 2 * E[i]] for i in range(3)]
  model, eta = fedexp.server_update(reference, trained, weights=[1, 1, 2], epsilon=0.25)
  assert eta == pytest.approx(8 / 7)
  np.testing.assert_allclose(model[0], [1 + 4 / 7, 1 + 4 / 7, 1 + 8 / 7])
  assert model[0].dtype == np.float64
  _, eta = fedexp.server_update(reference, trained, weights=[1, 1, 2], epsilon=0.0)
  assert eta == pytest.approx(4 / 3)
  with pytest.raises(ValueError, match='non-negative client weights'):
    fedexp.server_update(reference, trained, weights=[1, -1, 2])


def test_the_initial_model_anchor_by_hand():
  # FNBench's code: Δ_i from θ^0, D = θ^{t-1} - θ^0 = e_1, so D + Δ_i = (3,0,0), (1,2,0),
  # (1,0,2) with p = (1/4, 1/4, 1/2): Σ p ||·||² = 9/4 + 5/4 + 5/2 = 6 (= ||D||² + 2<D, Δ̄>
  # + Σ p ||Δ_i||² = 1 + 1 + 4, ``reanchor``), and ||D + Δ̄||² = ||(1.5, 0.5, 1)||² = 3.5.
  mean_sq, mean = fedexp.update_statistics([[2 * E[i]] for i in range(3)], [1, 1, 2])
  assert fedexp.reanchor(mean_sq, mean, [E[0]]) == pytest.approx((6.0, 3.5))
  # ε = 0.25: 6 / (2·3.75) = 0.8 < 1, so the step is FedAvg's: θ^0 + (D + Δ̄) = the mean.
  previous, initial = [np.ones(3)], [np.ones(3) - E[0]]
  trained = [[previous[0] + 2 * E[i]] for i in range(3)]
  model, eta = fedexp.server_update(initial, trained, weights=[1, 1, 2], epsilon=0.25)
  assert eta == 1.0
  np.testing.assert_allclose(model[0], previous[0] + [0.5, 0.5, 1.0])
  # ε = 0: 6/7 < 1 still; anchored at θ^{t-1} the same updates give 4/3 (above).
  assert fedexp.step_size(6.0, 3.5, 0.0) == 1.0
  # Away from η = 1 the two routes agree too: D = 0.1 e_1 gives η > 1.
  rng = np.random.default_rng(0)
  offset = [0.1 * E[0]]
  updates = [[rng.normal(size=3)] for _ in range(4)]
  initial = [np.zeros(3)]
  trained = [[offset[0] + u[0]] for u in updates]
  _, eta = fedexp.server_update(initial, trained, epsilon=1e-3)
  assert eta > 1.0
  assert eta == pytest.approx(fedexp.step_size(
      *fedexp.reanchor(*fedexp.update_statistics(updates), offset), 1e-3))


def test_iterate_average_and_decayed_epsilon():
  got = fedexp.iterate_average([np.array([1.0, 3.0])], [np.array([3.0, 5.0])])
  np.testing.assert_allclose(got[0], [2.0, 4.0])
  np.testing.assert_allclose(fedexp.iterate_average([np.array([1.0])])[0], [1.0])
  # ε·decay^{2(t+1)} with decay 0.5: round 0 → ε/4, round 1 → ε/16.
  assert fedexp.decayed_epsilon(1e-3, 0, 0.5) == pytest.approx(2.5e-4)
  assert fedexp.decayed_epsilon(1e-3, 1, 0.5) == pytest.approx(6.25e-5)
  assert fedexp.decayed_epsilon(1e-3, 0) == pytest.approx(1e-3 * 0.998 ** 2)
