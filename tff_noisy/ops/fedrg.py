"""FedRG (Wen et al., CVPR 2026, "FedRG: Unleashing the Representation Geometry for
Federated Learning with Noisy Clients") in NumPy, as its released code runs it (github
Tianjoker/FedRG, ``FedRG/client.py``: ``warm_train``, ``finetune_train_VMF_ori``; read at
commit 9fd93e7). The paper's text was not available: the equations below are the code's,
named by what the README and the code call them.

Stage I (``warm_train``): SimCLR on the projector's outputs of two views of each batch,
InfoNCE at temperature τ = 0.07 (``info_nce``; the code's ``info_nce_loss``).

Stage II (``finetune_train_VMF_ori``), per step on a batch of B examples with encoder
features h₁ (the first view) and h₂ (the second), z = h / (‖h‖ + 1e-8):

- a vMF mixture on the hypersphere, L components (μ_g, κ_g, β_g) and a background of
  weight π₀, gives the label-free geometric responsibilities
  γ = softmax([log π₀, r_i κ_g z₁·μ_g + log β_g] / 2) (``geometry_posterior``), where
  r_i = clip(κ̂_i / m, 0.2, 2) is the example's augmentation precision: κ̂_i = A⁻¹(‖(z₁ +
  z₂)/2‖), A⁻¹(R) ≈ R (d − R²) / (1 − R²) (``a_inverse``), m the running median of κ̂
  (``update_median``);
- the label-conditioned evidence M[y] (M [C, L]: p(component | observed class)) gives
  P_clean = Σ_g M[y, g] γ_g / (Σ_g γ_g + γ_bg) (``clean_posterior``);
- a two-component 1-D GMM of 1 − P_clean over the batch (the posterior of its lower-mean
  component ≥ 0.5: clean; ``ops.dividemix.clean_probability_em``) splits the batch;
- the loss is λ_c · mean_B SCE(logits, y) + λ_n · mean_noisy −log((softmax(logits) T)_y)
  (``fedrg_loss``), T the client's noise absorption matrix (``project_transition`` keeps
  its rows on the simplex after every step);
- the mixture follows the batch's statistics with momentum η = 0.1 (``update_mixture``).
"""

import numpy as np

from tff_noisy.ops import baseline_losses

EPS = 1e-8  # The code's l2n and median-ratio epsilon.
LOG_EPS = 1e-12  # Inside the code's logs and normalisations.
POSTERIOR_TEMPERATURE = 2.0  # logits_mix / 2.0 in the code.
RATIO_RANGE = (0.2, 2.0)  # clamp of r_i.
KAPPA_RANGE = (0.5, 100.0)  # clamp of the new κ.
PI0_RANGE = (1e-3, 0.2)  # clamp of π₀.
INITIAL_KAPPA = 5.0
INITIAL_PI0 = 0.05
MEDIAN_MOMENTUM = 0.9  # m ← 0.9 m + 0.1 median(κ̂).
BACKGROUND_PRIOR = 0.1  # π₀'s prior mass is 0.1 α_dp.
SCE_LOG_ZERO = float(np.log(1e-4))  # The code's SCELoss clamps the one-hot at 1e-4.


def l2_normalize(x) -> np.ndarray:
  """Rows x / (‖x‖ + 1e-8) (the code's ``l2n``)."""
  x = np.asarray(x, np.float64)
  return x / (np.linalg.norm(x, axis=-1, keepdims=True) + EPS)


def a_inverse(r, d: int) -> np.ndarray:
  """A_d⁻¹(R) ≈ R (d − R²) / (1 − R²), R clipped to [1e-6, 1 − 1e-6] (the code's
  ``Ainv_from_R``; Banerjee et al.'s approximation of the vMF concentration)."""
  r = np.clip(np.asarray(r, np.float64), 1e-6, 1 - 1e-6)
  return r * (d - r ** 2) / (1 - r ** 2)


def augmentation_concentration(z1, z2) -> np.ndarray:
  """κ̂_i = A⁻¹(‖(z₁ + z₂)/2‖) [B] of the two views' unit features [B, d]."""
  z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
  return a_inverse(np.linalg.norm((z1 + z2) / 2.0, axis=-1), z1.shape[-1])


def lower_median(values) -> float:
  """torch.median: the lower of the two middle values for an even count."""
  values = np.sort(np.asarray(values, np.float64).ravel())
  return float(values[(len(values) - 1) // 2])


def update_median(median: float, initialized: bool, kappa_hat) -> float:
  """m: the batch's median of κ̂ on the first Stage II step, then 0.9 m + 0.1 median."""
  batch = lower_median(kappa_hat)
  return batch if not initialized else MEDIAN_MOMENTUM * median + (1 - MEDIAN_MOMENTUM) * batch


def precision_ratio(kappa_hat, median: float) -> np.ndarray:
  """r_i = clip(κ̂_i / (m + 1e-8), 0.2, 2)."""
  return np.clip(np.asarray(kappa_hat, np.float64) / (median + EPS), *RATIO_RANGE)


def geometry_posterior(z, mu, kappa, beta, pi0, ratio=None) -> tuple:
  """``(γ_bg [B], γ [B, L])`` = softmax([log(π₀ + ε), r κ_g z·μ_g + log(β_g + ε)] / 2)
  (the code's ``post_tilde``; ``ratio`` None: r = 1, its ``post``)."""
  z, mu = np.asarray(z, np.float64), np.asarray(mu, np.float64)
  scaled = (z @ mu.T) * np.asarray(kappa, np.float64)[None, :]
  if ratio is not None:
    scaled = scaled * np.asarray(ratio, np.float64)[:, None]
  logits = np.concatenate([np.full((len(z), 1), np.log(pi0 + LOG_EPS)),
                           scaled + np.log(np.asarray(beta, np.float64) + LOG_EPS)], axis=1)
  logits = logits / POSTERIOR_TEMPERATURE
  logits -= logits.max(axis=1, keepdims=True)
  post = np.exp(logits)
  post /= post.sum(axis=1, keepdims=True)
  return post[:, 0], post[:, 1:]


def clean_posterior(gamma, gamma_bg, m_map, labels) -> np.ndarray:
  """P_clean [B] = q / (q + Σ_g (1 − M[y, g]) γ_g + γ_bg + ε), q = Σ_g M[y, g] γ_g."""
  m_y = np.asarray(m_map, np.float64)[np.asarray(labels, np.int64)]
  gamma = np.asarray(gamma, np.float64)
  q = np.sum(m_y * gamma, axis=1)
  rest = np.sum((1.0 - m_y) * gamma, axis=1)
  return q / (q + rest + np.asarray(gamma_bg, np.float64) + LOG_EPS)


def symmetric_ce(labels, logits, alpha: float = 0.1, beta: float = 1.0) -> np.ndarray:
  """The code's SCELoss [B]: α CE + β RCE with log 0 = log 1e-4 (Wang et al. 2019)."""
  return baseline_losses.symmetric_cross_entropy(labels, logits, alpha, beta, SCE_LOG_ZERO)


def softmax(logits) -> np.ndarray:
  logits = np.asarray(logits, np.float64)
  e = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def absorbed_nll(labels, logits, transition) -> np.ndarray:
  """−log((softmax(logits) T)_y + 1e-12) [B]: the noisy examples' loss through the
  client's noise absorption matrix T [C, C] (rows: true class, columns: observed)."""
  p_noisy = softmax(logits) @ np.asarray(transition, np.float64)
  return -np.log(p_noisy[np.arange(len(p_noisy)), np.asarray(labels, np.int64)] + LOG_EPS)


def fedrg_loss(labels, logits, transition, noisy, clean_weight: float = 0.4,
               noise_weight: float = 1.0, sce_alpha: float = 0.1,
               sce_beta: float = 1.0) -> np.ndarray:
  """ℓ [B] whose mean is the code's batch loss λ_c mean_B SCE + λ_n Σ_noisy NLL_T /
  (|noisy| + 1e-8): ℓ_i = λ_c SCE_i + λ_n B noisy_i NLL_T,i / (|noisy| + 1e-8). The SCE
  term covers every example of the batch, as the code's ``sce.forward(...).mean()``."""
  noisy = np.asarray(noisy, np.float64)
  sce = symmetric_ce(labels, logits, sce_alpha, sce_beta)
  nll = absorbed_nll(labels, logits, transition)
  return clean_weight * sce + noise_weight * len(noisy) * noisy * nll / (noisy.sum() + EPS)


def project_transition(transition) -> np.ndarray:
  """T clamped to ≥ 1e-6 and each row divided by its sum (after every step)."""
  t = np.maximum(np.asarray(transition, np.float64), 1e-6)
  return t / t.sum(axis=1, keepdims=True)


def update_mixture(mixture: dict, z, gamma, gamma_bg, labels, clean, dp_alpha: float = 5.0,
                   dirichlet_smooth: float = 0.5, momentum: float = 0.1) -> dict:
  """The mixture after one batch (the code's update with ``mix_update_interval`` 1).

  ``mixture``: ``mu`` [L, d], ``kappa`` [L], ``beta`` [L], ``pi0`` (), ``m`` [C, L];
  the batch's unit features ``z`` [B, d], responsibilities ``gamma`` [B, L] and
  ``gamma_bg`` [B], observed ``labels`` [B] and ``clean`` [B] (0/1). With S = γᵀ z,
  n_g = Σ_b γ_b,g, n_bg = Σ_b γ_bg,b, N[c] = Σ_{b: y_b = c, clean} γ_b and η the momentum:
  μ ← l2n((1 − η) μ + η l2n(S)); κ ← (1 − η) κ + η clip(A⁻¹(‖S_g‖ / (n_g + 1e-8)), 0.5,
  100); β ← (1 − η) β + η (n + α/L) / (Σn + α + ε); π₀ ← clip((1 − η) π₀ + η (n_bg + 0.1α)
  / (Σn + n_bg + 0.1α + ε), 1e-3, 0.2); when Σ N > 0, M ← (1 − η) M + η (N + α_M) / rowsum
  (N + α_M), rows renormalised.
  """
  z = np.asarray(z, np.float64)
  gamma, gamma_bg = np.asarray(gamma, np.float64), np.asarray(gamma_bg, np.float64)
  mu, kappa = np.asarray(mixture['mu'], np.float64), np.asarray(mixture['kappa'], np.float64)
  beta, m_map = np.asarray(mixture['beta'], np.float64), np.asarray(mixture['m'], np.float64)
  pi0 = float(mixture['pi0'])
  num_components, d = mu.shape
  eta = momentum
  sums = gamma.T @ z
  counts = gamma.sum(axis=0)
  background = gamma_bg.sum()
  per_class = np.zeros_like(m_map)
  np.add.at(per_class, np.asarray(labels, np.int64), gamma * np.asarray(clean, np.float64)[:, None])
  mu = l2_normalize((1 - eta) * mu + eta * l2_normalize(sums))
  r = np.clip(np.linalg.norm(sums, axis=1) / (counts + EPS), 1e-6, 1 - 1e-6)
  kappa = (1 - eta) * kappa + eta * np.clip(a_inverse(r, d), *KAPPA_RANGE)
  prior = dp_alpha / num_components
  new_beta = (counts + prior) / (counts.sum() + prior * num_components + LOG_EPS)
  bg_prior = dp_alpha * BACKGROUND_PRIOR
  new_pi0 = (background + bg_prior) / (counts.sum() + background + bg_prior + LOG_EPS)
  beta = (1 - eta) * beta + eta * new_beta
  pi0 = float(np.clip((1 - eta) * pi0 + eta * new_pi0, *PI0_RANGE))
  if per_class.sum() > 0:
    smoothed = per_class + dirichlet_smooth
    m_map = (1 - eta) * m_map + eta * smoothed / (smoothed.sum(axis=1, keepdims=True) + LOG_EPS)
    m_map = m_map / (m_map.sum(axis=1, keepdims=True) + LOG_EPS)
  return {'mu': mu, 'kappa': kappa, 'beta': beta, 'pi0': pi0, 'm': m_map}


def initial_mixture(num_classes: int, num_components: int, dim: int, rng) -> dict:
  """The code's start: μ unit rows of N(0, 1) draws, κ = 5, β = 1/L, π₀ = 0.05, M = 1/C."""
  return {'mu': l2_normalize(rng.standard_normal((num_components, dim))),
          'kappa': np.full(num_components, INITIAL_KAPPA),
          'beta': np.full(num_components, 1.0 / num_components), 'pi0': INITIAL_PI0,
          'm': np.full((num_classes, num_components), 1.0 / num_classes)}


def info_nce(projections, temperature: float = 0.07) -> np.ndarray:
  """SimCLR's loss per row [2B] of the projections of x (first B rows) and its second
  view (last B): −log(exp(s_ip / τ) / Σ_{j ≠ i} exp(s_ij / τ)), s the cosine, p the
  other view of the same example (the code's ``info_nce_loss`` then cross-entropy)."""
  f = np.asarray(projections, np.float64)
  f = f / np.sqrt(np.maximum(np.sum(f * f, axis=1, keepdims=True), 1e-12))
  n = len(f)
  half = n // 2
  s = f @ f.T / temperature
  np.fill_diagonal(s, -np.inf)
  partner = (np.arange(n) + half) % n
  top = s.max(axis=1, keepdims=True)
  log_norm = top[:, 0] + np.log(np.exp(s - top).sum(axis=1))
  return log_norm - s[np.arange(n), partner]
