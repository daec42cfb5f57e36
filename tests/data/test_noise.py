"""Label noise: realised rates and confusion structure, determinism, errors."""

import numpy as np
import pytest

from tff_noisy.config import NoiseConfig
from tff_noisy.data import noise as noise_lib

C = 10
BIG = [np.repeat(np.arange(C), 2000)]  # One client, 20,000 labels.


def _noisy(name, clients=BIG, seed=0, num_classes=C, **kwargs):
  return noise_lib.apply_noise(clients, num_classes, NoiseConfig(name=name, **kwargs), seed)


def _clients(num_clients, per_class=100):
  return [np.repeat(np.arange(C), per_class) for _ in range(num_clients)]


def _rates(clients, noisy):
  return np.array([np.mean(y != z) for y, z in zip(clients, noisy)])


def test_symmetric_rate_and_uniform_off_diagonal():
  [noisy] = _noisy('symmetric', rate=0.4)
  assert abs(np.mean(noisy != BIG[0]) - 0.4) < 0.02
  matrix = noise_lib.transition_matrix(BIG[0], noisy, C)
  off = matrix[~np.eye(C, dtype=bool)]
  assert np.abs(off - 0.4 / (C - 1)).max() < 0.02


def test_pairflip_puts_all_mass_on_the_previous_class():
  [noisy] = _noisy('pairflip', rate=0.3)
  matrix = noise_lib.transition_matrix(BIG[0], noisy, C)
  target = np.roll(np.eye(C), -1, axis=1).astype(bool)  # (c, c - 1 mod C)
  assert np.abs(matrix[target] - 0.3).max() < 0.04
  assert matrix[~target & ~np.eye(C, dtype=bool)].sum() == 0


def test_cifar10_asym_flips_only_the_four_pairs():
  [noisy] = _noisy('cifar10_asym', rate=0.4)
  matrix = noise_lib.transition_matrix(BIG[0], noisy, C)
  expected = noise_lib.cifar10_asym_matrix(C, 0.4)
  assert np.abs(matrix - expected).max() < 0.04
  assert np.all(matrix[expected == 0] == 0)
  with pytest.raises(ValueError, match='10 classes'):
    _noisy('cifar10_asym', rate=0.4, num_classes=11)


def test_noisy_fraction_picks_round_f_m_clients():
  clients = _clients(10)
  rates = _rates(clients, _noisy('symmetric', clients, rate=0.5, noisy_fraction=0.8))
  assert (rates > 0).sum() == 8


@pytest.mark.parametrize('sparsity,targets', [(0.0, 9), (0.4, 6), (0.7, 3), (1.0, 1)])
def test_fedln_sparsity_sets_targets_per_class(sparsity, targets):
  clients = _clients(5, per_class=400)
  noisy = _noisy('fedln', clients, level=0.4, sparsity=sparsity)
  patterns = []
  for y, z in zip(clients, noisy):
    assert abs(np.mean(y != z) - 0.4) < 0.05  # FedLN's official code's tolerance.
    matrix = noise_lib.transition_matrix(y, z, C)
    np.fill_diagonal(matrix, 0)
    assert set((matrix > 0).sum(axis=1)) == {targets}
    patterns.append(matrix > 0)
  if targets < 9:  # Every client draws its own matrix.
    assert any((p != patterns[0]).any() for p in patterns[1:])


def test_shared_matrix_gives_every_noisy_client_the_same_targets():
  clients = _clients(4, per_class=400)
  for name in ('fedln', 'cleanlab'):
    noisy = _noisy(name, clients, level=0.4, sparsity=1.0, shared_matrix=True)
    patterns = [noise_lib.transition_matrix(y, z, C) > 0 for y, z in zip(clients, noisy)]
    assert all((p == patterns[0]).all() for p in patterns)


def test_cleanlab_matches_trace_and_sparsity():
  clients = _clients(3, per_class=1000)
  config = NoiseConfig(name='cleanlab', level=0.4, sparsity=0.6)
  noisy = noise_lib.apply_noise(clients, C, config, 0)
  nominals = noise_lib.client_matrices(3, C, config, 0)
  for y, z, nominal in zip(clients, noisy, nominals):
    realised = noise_lib.transition_matrix(y, z, C)
    assert np.abs(realised - nominal).max() <= 1e-3  # Exact counts: within 1/N_c.
    assert abs(np.trace(realised) - C * 0.6) < 0.01
    off = ~np.eye(C, dtype=bool)
    assert (realised[off] == 0).mean() >= 0.6 - 1e-9


def test_cleanlab_handles_a_client_without_some_classes_and_keeps_global_rng():
  np.random.seed(123)
  expected = np.random.random()
  np.random.seed(123)
  y = np.repeat([2, 5], 500)
  config = NoiseConfig(name='cleanlab', level=0.5, sparsity=0.0)
  [noisy] = noise_lib.apply_noise([y], C, config, 0)
  [nominal] = noise_lib.client_matrices(1, C, config, 0)
  realised = noise_lib.transition_matrix(y, noisy, C)
  assert np.abs(realised[[2, 5]] - nominal[[2, 5]]).max() <= 2e-3
  assert np.random.random() == expected


def test_fedcorr_rates():
  config = NoiseConfig(name='fedcorr', rho=0.5, tau=0.5)
  rates = noise_lib.client_rates(400, C, config, np.random.default_rng(0))
  noisy = rates > 0
  assert abs(noisy.mean() - 0.5) < 0.08
  assert rates[noisy].min() >= 0.5 * 0.9 and rates[noisy].max() <= 0.9
  clients = _clients(20)
  realised = _rates(clients, _noisy('fedcorr', clients, rho=1.0, tau=0.2))
  assert realised.min() > 0.05 and realised.max() < 0.98


def test_linear_rates_are_monotone():
  clients = _clients(8, per_class=300)
  config = NoiseConfig(name='linear', min_rate=0.0, max_rate=0.8)
  np.testing.assert_allclose(noise_lib.client_rates(8, C, config, None),
                             np.linspace(0, 0.8, 8))
  realised = _rates(clients, _noisy('linear', clients, min_rate=0.0, max_rate=0.8))
  assert realised[0] == 0 and np.all(np.diff(realised) > 0)
  assert abs(realised[-1] - 0.8) < 0.05
  pair = _noisy('linear', clients[:2], min_rate=0.5, max_rate=0.5, flip='pairflip')
  assert np.all((pair[0] == clients[0]) | (pair[0] == (clients[0] - 1) % C))


def test_mixed_alternates_symmetric_and_pairflip_at_linear_rates():
  clients = _clients(8, per_class=300)
  config = NoiseConfig(name='mixed', min_rate=0.2, max_rate=0.6)
  kinds = noise_lib.client_flip_kinds(8, config)
  assert kinds == ['symmetric', 'pairflip'] * 4  # Half the clients of each kind.
  noisy = _noisy('mixed', clients, min_rate=0.2, max_rate=0.6)
  np.testing.assert_allclose(_rates(clients, noisy), np.linspace(0.2, 0.6, 8), atol=0.05)
  for y, z, kind in zip(clients, noisy, kinds):
    flipped = z != y
    to_previous = np.all(z[flipped] == (y[flipped] - 1) % C)
    assert to_previous == (kind == 'pairflip')  # Symmetric flips reach other classes too.
  again = _noisy('mixed', clients, min_rate=0.2, max_rate=0.6)
  assert all(np.array_equal(a, b) for a, b in zip(noisy, again))
  assert noise_lib.client_flip_kinds(3, NoiseConfig(name='linear', flip='pairflip')) == [
      'pairflip'] * 3
  assert noise_lib.client_flip_kinds(3, NoiseConfig(name='symmetric')) is None


def test_choice_rates_are_balanced():
  levels = [round(0.1 * k, 1) for k in range(1, 11)]
  rng = np.random.default_rng(0)
  rates = noise_lib.client_rates(20, C, NoiseConfig(name='choice', rates=levels), rng)
  assert sorted(rates) == sorted(levels * 2)
  uneven = noise_lib.client_rates(23, C, NoiseConfig(name='choice', rates=levels), rng)
  assert set(np.unique(uneven, return_counts=True)[1]) == {2, 3}
  draws = noise_lib.client_rates(
      500, C, NoiseConfig(name='choice', rates=[0.2, 0.6], balanced=False), rng)
  assert set(draws) == {0.2, 0.6} and (draws == 0.2).sum() != 250
  clients = _clients(10, per_class=200)
  realised = _rates(clients, _noisy('choice', clients, rates=[0.0, 1.0]))
  assert sorted(realised) == [0.0] * 5 + [1.0] * 5


def test_real_labels_are_passed_through():
  clients = _clients(2)
  real = [(y + 1) % C for y in clients]
  out = noise_lib.apply_noise(clients, C, NoiseConfig(name='real'), 0, real_labels=real)
  assert all(np.array_equal(a, b) and a.dtype == np.int64 for a, b in zip(out, real))
  with pytest.raises(ValueError, match='real_labels'):
    noise_lib.apply_noise(clients, C, NoiseConfig(name='real'), 0)


@pytest.mark.parametrize('kwargs', [
    dict(name='symmetric', rate=0.3), dict(name='fedln', level=0.4, sparsity=0.4),
    dict(name='cleanlab', level=0.3, sparsity=0.5), dict(name='fedcorr', rho=0.8, tau=0.3),
    dict(name='choice', rates=[0.2, 0.5]), dict(name='linear', max_rate=0.5),
    dict(name='mixed', min_rate=0.1, max_rate=0.5)])
def test_seeded(kwargs):
  clients = _clients(4)
  first, again, other = (_noisy(clients=clients, seed=s, **kwargs) for s in (1, 1, 2))
  assert all(np.array_equal(a, b) for a, b in zip(first, again))
  assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_a_clients_noise_does_not_depend_on_the_number_of_clients():
  few = _noisy('symmetric', _clients(2), rate=0.5)
  many = _noisy('symmetric', _clients(5), rate=0.5)
  assert all(np.array_equal(a, b) for a, b in zip(few, many))


def test_none_copies_labels():
  clients = _clients(2)
  out = _noisy('none', clients)
  assert all(np.array_equal(a, b) and a is not b for a, b in zip(out, clients))


def test_transition_matrix_rows():
  y_true = np.array([0, 0, 1, 1, 1, 1])
  y_obs = np.array([0, 1, 1, 1, 2, 2])
  np.testing.assert_allclose(noise_lib.transition_matrix(y_true, y_obs, 4), [
      [0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 1, 0], [0, 0, 0, 1]])


def test_errors():
  with pytest.raises(ValueError, match="noise.name: unknown noise model 'nope'.*symmetric"):
    _noisy('nope')
  with pytest.raises(ValueError, match=r'outside \[0, 10\)'):
    _noisy('symmetric', [np.array([0, 10])], rate=0.1)


def test_cleanlab_matrix_seed_is_cleanlabs_own_and_valid_matrix_is_learnable():
  from cleanlab.benchmarking import noise_generation
  config = NoiseConfig(name='cleanlab', level=0.4, sparsity=0.8, shared_matrix=True,
                       matrix_seed=42, valid_matrix=True)
  shared = noise_lib.client_matrices(3, C, config, seed=0)
  assert all(m is shared[0] for m in shared)
  assert all(np.array_equal(m, noise_lib.client_matrices(2, C, config, seed=7)[0])
             for m in shared)  # The run's seed does not move it.
  direct = noise_generation.generate_noise_matrix_from_trace(
      C, C * 0.6, py=np.full(C, 0.1), frac_zero_noise_rates=0.8, valid_noise_matrix=True,
      seed=42)
  np.testing.assert_array_equal(shared[0], direct.T)
  # Learnable (cleanlab's check, uniform prior): p(true c | noisy c) > p(true c).
  assert (np.diagonal(shared[0]) / shared[0].sum(axis=0) > 0.1).all()
  per_client = noise_lib.client_matrices(
      2, C, NoiseConfig(name='cleanlab', level=0.4, sparsity=0.8, matrix_seed=42), seed=0)
  assert not np.array_equal(per_client[0], per_client[1])  # Client m: seed 42 + m.


def test_cleanlab_without_a_learnable_matrix_says_so(monkeypatch):
  from cleanlab.benchmarking import noise_generation
  from tff_noisy.errors import ConfigError
  # cleanlab returns None once its 10,000 draws found no learnable matrix.
  monkeypatch.setattr(noise_generation, 'generate_noise_matrix_from_trace',
                      lambda *args, **kwargs: None)
  with pytest.raises(ConfigError, match='noise.valid_matrix: cleanlab drew no learnable'):
    noise_lib.cleanlab_matrix(3, 0.6, 0.0, seed=0, valid=True)
