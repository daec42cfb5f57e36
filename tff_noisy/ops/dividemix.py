"""DivideMix (Li et al., ICLR 2020) in NumPy, as FNBench's federated DivideMix runs it on a
client (github Sprinter1999/FNBench, ``LocalUpdateDivideMix``; released code
LiJunnan1992/DivideMix, ``Train_cifar.py``).

Two networks f¹, f² (in FL: two global models, each averaged on its own). Per local epoch
after warm-up (Algorithm 1):

- Co-divide (§3.1, Eq. 1; Algorithm 1, co-divide): each network's per-example
  cross-entropy on the client's data, min-max scaled to [0, 1], is fitted by a
  two-component 1-D GMM; w_i is the posterior of the smaller-mean component, and the
  examples with w_i > τ are "labelled" (X; the paper's w_i ≥ τ, the code's >), the
  others "unlabelled" (U). The network
  being trained uses the OTHER network's division and w.
- Label co-refinement (Eq. 3) and sharpening (Eq. 4): ȳ = w y + (1 − w) p̄, p̄ the mean of
  the trained network's softmax over the M augmentations of x; ŷ = Sharpen(ȳ, T),
  Sharpen(p, T)_c = p_c^{1/T} / Σ_d p_d^{1/T}.
- Label co-guessing (Algorithm 1): q = Sharpen(mean of both networks' softmax over
  the M augmentations of u, T).
- MixMatch (Eqs. 5-8): λ ~ Beta(α, α), λ' = max(λ, 1 − λ); the batch X̂ ∪ Û (every
  augmentation, with its target) mixed with a permutation of itself, x' = λ' x + (1 − λ')
  x_π, p' = λ' p + (1 − λ') p_π (``mixup.mix``).
- Loss (Eqs. 9-12): L_X = −mean_{X'} Σ_c p'_c log f_c(x'); L_U = mean over U' and the C
  classes of (f_c(u') − q'_c)² (the code's ``torch.mean``: a 1/C the paper's Eq. 10 does
  not print, as in MixMatch); L_reg = Σ_c π_c log(π_c / mean_{X' ∪ U'} f_c), π = 1/C;
  L = L_X + λ_u L_U + λ_r L_reg with λ_u ramped linearly over 16 rounds after warm-up.

``clean_probability`` fits sklearn's GMM as the codes do (its k-means start draws from a
seed); ``clean_probability_em`` runs the same EM from a fixed start (means at the scaled
losses' min and max), which ``dividemix_tf.clean_probability`` runs inside a client's
round. ``dividemix_tf`` holds the TensorFlow twins of what runs inside a training step.
"""

import warnings

import numpy as np
import scipy.special

from tff_noisy.ops import detection
from tff_noisy.ops import mixup

# FNBench's (and FedRN's) GMM; the DivideMix release uses max_iter=10.
GMM_MAX_ITER = 100
GMM_TOL = 1e-2
GMM_REG_COVAR = 5e-4
RAMPUP_ROUNDS = 16


def normalized_losses(losses) -> np.ndarray:
  """Per-example losses [n] min-max scaled to [0, 1] (the released ``eval_train``); all
  equal: zeros (the release divides by 0)."""
  losses = np.asarray(losses, np.float64)
  return detection.minmax_columns(losses[:, None])[:, 0]


def clean_probability(losses, seed: int = 0, max_iter: int = GMM_MAX_ITER,
                      tol: float = GMM_TOL, reg_covar: float = GMM_REG_COVAR) -> np.ndarray:
  """w [n]: the posterior of the smaller-mean component of a two-component GMM fitted to
  the min-max scaled ``losses`` (Li et al. 2020, §3.1; Algorithm 1, co-divide).

  Fewer than 2 examples or all-equal losses: no split can be made, every w is 1.
  """
  scaled = normalized_losses(losses)
  if len(scaled) < 2 or np.all(scaled == scaled[0]):
    return np.ones(len(scaled))
  from sklearn import mixture  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():  # max_iter=10 or 100 may stop short: expected.
    warnings.simplefilter('ignore')
    gmm = mixture.GaussianMixture(n_components=2, max_iter=max_iter, tol=tol,
                                  reg_covar=reg_covar, random_state=seed)
    gmm.fit(scaled[:, None])
    posterior = gmm.predict_proba(scaled[:, None])
  return posterior[:, int(np.argmin(gmm.means_[:, 0]))]


def divide(probability, threshold: float = 0.5) -> np.ndarray:
  """bool [n]: the labelled set X, w_i > τ (Algorithm 1; the released code's >); the rest
  is U."""
  return np.asarray(probability, np.float64) > threshold


def sharpen(p, temperature: float) -> np.ndarray:
  """Sharpen(p, T)_c = p_c^{1/T} / Σ_d p_d^{1/T} over the last axis (Eq. 4)."""
  powered = np.asarray(p, np.float64) ** (1.0 / temperature)
  return powered / powered.sum(axis=-1, keepdims=True)


def softmax(logits) -> np.ndarray:
  return scipy.special.softmax(np.asarray(logits, np.float64), axis=-1)


def refine_labels(labels, w, augmented_logits, temperature: float) -> np.ndarray:
  """ŷ [B, C] = Sharpen(w y + (1 − w) p̄, T) (Eqs. 3-4); y one-hot of ``labels`` [B],
  ``w`` [B] the other network's clean probabilities, ``augmented_logits`` [M, B, C] the
  trained network's logits on M augmentations (p̄ the mean of their softmax)."""
  probs = softmax(augmented_logits).mean(axis=0)
  onehot = np.eye(probs.shape[-1])[np.asarray(labels, np.int64)]
  w = np.asarray(w, np.float64)[:, None]
  return sharpen(w * onehot + (1.0 - w) * probs, temperature)


def co_guess(logits_f, logits_g, temperature: float) -> np.ndarray:
  """q [B, C] = Sharpen(mean softmax of both networks over M augmentations, T)
  (Algorithm 1, co-guessing); ``logits_f``, ``logits_g`` [M, B, C]."""
  probs = np.concatenate([softmax(logits_f), softmax(logits_g)], axis=0)
  return sharpen(probs.mean(axis=0), temperature)


def mixmatch_lambda(lam: float) -> float:
  """λ' = max(λ, 1 − λ) (Eq. 6): the mixed example stays closer to its own x."""
  return float(max(lam, 1.0 - lam))


def mix(values, lam: float, permutation) -> np.ndarray:
  """λ' v + (1 − λ') v[π] (Eqs. 7-8) on inputs or targets, λ' = ``mixmatch_lambda(lam)``."""
  return mixup.mix(values, mixmatch_lambda(lam), permutation)


def labelled_loss(logits_x, targets_x) -> float:
  """L_X = −mean_b Σ_c p'_bc log softmax(z_b)_c (Eq. 9)."""
  log_p = scipy.special.log_softmax(np.asarray(logits_x, np.float64), axis=-1)
  return float(-np.mean(np.sum(np.asarray(targets_x, np.float64) * log_p, axis=-1)))


def unlabelled_loss(logits_u, targets_u) -> float:
  """L_U = mean over the batch and the C classes of (softmax(z)_c − q'_c)² (Eq. 10 with
  the released code's 1/C)."""
  return float(np.mean((softmax(logits_u) - np.asarray(targets_u, np.float64)) ** 2))


def prior_regularizer(logits, prior=None) -> float:
  """L_reg = Σ_c π_c log(π_c / mean_b softmax(z_b)_c) (Eq. 11) over every mixed row;
  π uniform (1/C) unless given."""
  mean_p = softmax(logits).mean(axis=0)
  prior = np.full(mean_p.shape, 1.0 / mean_p.size) if prior is None else np.asarray(
      prior, np.float64)
  return float(np.sum(prior * np.log(prior / mean_p)))


def lambda_u_weight(progress: float, warmup_rounds: float, lambda_u: float,
                    rampup_rounds: float = RAMPUP_ROUNDS) -> float:
  """λ_u · clip((t − T_w) / 16, 0, 1), t = round (0-based) + batch / batches, T_w the
  warm-up rounds (the released ``linear_rampup``; FNBench passes the FL round as t)."""
  return float(lambda_u * np.clip((progress - warmup_rounds) / rampup_rounds, 0.0, 1.0))


def dividemix_loss(logits_x, targets_x, logits_u, targets_u, lambda_u: float,
                   lambda_r: float = 1.0) -> float:
  """L = L_X + λ_u L_U + λ_r L_reg (Eq. 12) on the mixed batch: X' rows first, then U'
  rows; L_reg over all of them."""
  everything = np.concatenate([np.asarray(logits_x, np.float64),
                               np.asarray(logits_u, np.float64)], axis=0)
  return (labelled_loss(logits_x, targets_x) + lambda_u * unlabelled_loss(logits_u, targets_u)
          + lambda_r * prior_regularizer(everything))


def per_example_loss(logits, targets, num_labelled: int, lambda_u: float,
                     lambda_r: float = 1.0) -> np.ndarray:
  """ℓ [N] whose mean is ``dividemix_loss``: rows < ``num_labelled`` are X' (scaled CE
  N/|X'|), the others U' (scaled squared error N/|U'| · mean_c), and every row carries
  λ_r L_reg."""
  logits = np.asarray(logits, np.float64)
  targets = np.asarray(targets, np.float64)
  n = len(logits)
  num_unlabelled = n - num_labelled
  log_p = scipy.special.log_softmax(logits, axis=-1)
  ce = -np.sum(targets * log_p, axis=-1)
  squared = np.mean((np.exp(log_p) - targets) ** 2, axis=-1)
  is_x = np.arange(n) < num_labelled
  loss = np.where(is_x, ce * n / max(num_labelled, 1),
                  lambda_u * squared * n / max(num_unlabelled, 1))
  return loss + lambda_r * prior_regularizer(logits)


def clean_probability_em(losses, max_iter: int = GMM_MAX_ITER, tol: float = GMM_TOL,
                         reg_covar: float = GMM_REG_COVAR) -> np.ndarray:
  """w [n] as ``clean_probability`` (Li et al. 2020, §3.1), by EM from a fixed start: the
  means at the scaled losses' min and max (0 and 1), both variances their variance plus
  ``reg_covar``, weights 1/2 (sklearn's k-means start is replaced, so no seed is drawn).
  EM stops after ``max_iter`` iterations or when the mean log-likelihood changes by less
  than ``tol`` (sklearn's rule); w is the final parameters' posterior of the
  smaller-mean component. Fewer than 2 examples or all-equal losses: every w is 1."""
  x = normalized_losses(losses)
  if len(x) < 2 or np.all(x == x[0]):
    return np.ones(len(x))
  means = np.array([0.0, 1.0])
  variances = np.full(2, x.var() + reg_covar)
  weights = np.full(2, 0.5)

  def e_step():
    log_prob = (np.log(weights) - 0.5 * (np.log(2 * np.pi * variances)
                                         + (x[:, None] - means) ** 2 / variances))
    norm = scipy.special.logsumexp(log_prob, axis=1)
    return norm, np.exp(log_prob - norm[:, None])

  bound = -np.inf
  for _ in range(max_iter):
    norm, resp = e_step()
    counts = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
    means = resp.T @ x / counts
    variances = (resp * (x[:, None] - means) ** 2).sum(axis=0) / counts + reg_covar
    weights = counts / counts.sum()
    previous, bound = bound, norm.mean()
    if abs(bound - previous) < tol:
      break
  return e_step()[1][:, int(np.argmin(means))]


def masked_per_example_loss(logits, targets, labelled, lambda_u: float,
                            lambda_r: float = 1.0) -> np.ndarray:
  """``per_example_loss`` with X' the rows where ``labelled`` [N] (bool) holds, in any
  order: its mean is L_X over them + λ_u L_U over the others + λ_r L_reg (Eq. 12)."""
  logits = np.asarray(logits, np.float64)
  targets = np.asarray(targets, np.float64)
  labelled = np.asarray(labelled, bool)
  n, num_labelled = len(logits), int(labelled.sum())
  log_p = scipy.special.log_softmax(logits, axis=-1)
  ce = -np.sum(targets * log_p, axis=-1)
  squared = np.mean((np.exp(log_p) - targets) ** 2, axis=-1)
  loss = np.where(labelled, ce * n / max(num_labelled, 1),
                  lambda_u * squared * n / max(n - num_labelled, 1))
  return loss + lambda_r * prior_regularizer(logits)


def selection_report(selected, true_labels, observed_labels) -> dict:
  """The labelled set X (``selected`` [n] bool) against the truth: ``selected`` (its
  size), ``precision`` (its share of clean labels, observed = true) and ``recall`` (the
  share of clean labels in it); None where a denominator is 0."""
  selected = np.asarray(selected, bool)
  clean = np.asarray(true_labels) == np.asarray(observed_labels)
  hits = int((selected & clean).sum())
  return {'selected': int(selected.sum()),
          'precision': hits / int(selected.sum()) if selected.any() else None,
          'recall': hits / int(clean.sum()) if clean.any() else None}
