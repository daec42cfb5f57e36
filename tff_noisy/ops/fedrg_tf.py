"""TensorFlow twins of ``fedrg`` for a client's training step (float32). No gradient flows
through the geometry (the code's ``detach`` and ``torch.no_grad``): only the SCE term and
the absorbed NLL (through the logits and T) are differentiated."""

import tensorflow as tf

from tff_noisy.ops import baseline_losses_tf
from tff_noisy.ops import dividemix_tf
from tff_noisy.ops import fedrg

GMM_MAX_ITER = 100  # sklearn's GaussianMixture defaults, as the code builds it.
GMM_TOL = 1e-3
GMM_REG_COVAR = 1e-6


def l2_normalize(x):
  """``fedrg.l2_normalize``."""
  return x / (tf.norm(x, axis=-1, keepdims=True) + fedrg.EPS)


def a_inverse(r, d):
  """``fedrg.a_inverse``."""
  r = tf.clip_by_value(r, 1e-6, 1 - 1e-6)
  return r * (tf.cast(d, r.dtype) - r ** 2) / (1 - r ** 2)


def augmentation_concentration(z1, z2):
  """``fedrg.augmentation_concentration``: κ̂ [B]."""
  return a_inverse(tf.norm((z1 + z2) / 2.0, axis=-1), tf.shape(z1)[-1])


def lower_median(values):
  """``fedrg.lower_median`` (torch.median)."""
  values = tf.sort(tf.reshape(values, [-1]))
  return values[(tf.size(values) - 1) // 2]


def update_median(median, initialized, kappa_hat):
  """``fedrg.update_median``; ``initialized`` a 0/1 float."""
  batch = lower_median(kappa_hat)
  running = fedrg.MEDIAN_MOMENTUM * median + (1 - fedrg.MEDIAN_MOMENTUM) * batch
  return tf.where(initialized > 0.5, running, batch)


def precision_ratio(kappa_hat, median):
  """``fedrg.precision_ratio``."""
  return tf.clip_by_value(kappa_hat / (median + fedrg.EPS), *fedrg.RATIO_RANGE)


def geometry_posterior(z, mu, kappa, beta, pi0, ratio=None):
  """``fedrg.geometry_posterior``: ``(γ_bg [B], γ [B, L])``."""
  scaled = tf.matmul(z, mu, transpose_b=True) * kappa[None, :]
  if ratio is not None:
    scaled = scaled * ratio[:, None]
  background = tf.fill([tf.shape(z)[0], 1], tf.math.log(pi0 + fedrg.LOG_EPS))
  logits = tf.concat([background, scaled + tf.math.log(beta + fedrg.LOG_EPS)[None, :]], 1)
  post = tf.nn.softmax(logits / fedrg.POSTERIOR_TEMPERATURE, axis=1)
  return post[:, 0], post[:, 1:]


def clean_posterior(gamma, gamma_bg, m_map, labels):
  """``fedrg.clean_posterior``: P_clean [B]."""
  m_y = tf.gather(m_map, tf.cast(labels, tf.int32))
  q = tf.reduce_sum(m_y * gamma, axis=1)
  rest = tf.reduce_sum((1.0 - m_y) * gamma, axis=1)
  return q / (q + rest + gamma_bg + fedrg.LOG_EPS)


def noisy_split(p_clean, threshold):
  """``(noisy [B] 0/1, the GMM's clean probability [B])``: a two-component GMM of
  1 − P_clean over the batch (``dividemix_tf.clean_probability``, sklearn's defaults:
  100 iterations, tol 1e-3, reg 1e-6 on the min-max scaled values); clean when its
  lower-mean component's posterior ≥ ``threshold``."""
  clean_probability = dividemix_tf.clean_probability(
      1.0 - p_clean, max_iter=GMM_MAX_ITER, tol=GMM_TOL, reg_covar=GMM_REG_COVAR)
  noisy = tf.cast(clean_probability < threshold, tf.float32)
  return noisy, clean_probability


def absorbed_nll(labels, logits, transition):
  """``fedrg.absorbed_nll``."""
  p_noisy = tf.matmul(tf.nn.softmax(logits), transition)
  return -tf.math.log(tf.gather(p_noisy, tf.cast(labels, tf.int32), batch_dims=1)
                      + fedrg.LOG_EPS)


def fedrg_loss(labels, logits, transition, noisy, clean_weight=0.4, noise_weight=1.0,
               sce_alpha=0.1, sce_beta=1.0):
  """``fedrg.fedrg_loss``: ℓ [B] with the code's batch loss as its mean."""
  noisy = tf.stop_gradient(tf.cast(noisy, tf.float32))
  sce = baseline_losses_tf.symmetric_cross_entropy(labels, logits, sce_alpha, sce_beta,
                                                   fedrg.SCE_LOG_ZERO)
  nll = absorbed_nll(labels, logits, transition)
  size = tf.cast(tf.shape(noisy)[0], tf.float32)
  return clean_weight * sce + noise_weight * size * noisy * nll / (
      tf.reduce_sum(noisy) + fedrg.EPS)


def project_transition(transition):
  """``fedrg.project_transition``."""
  t = tf.maximum(transition, 1e-6)
  return t / tf.reduce_sum(t, axis=1, keepdims=True)


def update_mixture(mixture: dict, z, gamma, gamma_bg, labels, clean, dp_alpha=5.0,
                   dirichlet_smooth=0.5, momentum=0.1) -> dict:
  """``fedrg.update_mixture`` (the same keys, ``pi0`` a scalar tensor)."""
  mu, kappa, beta, m_map = mixture['mu'], mixture['kappa'], mixture['beta'], mixture['m']
  num_components = tf.cast(tf.shape(mu)[0], tf.float32)
  eta = momentum
  sums = tf.matmul(gamma, z, transpose_a=True)
  counts = tf.reduce_sum(gamma, axis=0)
  background = tf.reduce_sum(gamma_bg)
  per_class = tf.tensor_scatter_nd_add(tf.zeros_like(m_map),
                                       tf.cast(labels, tf.int32)[:, None],
                                       gamma * tf.cast(clean, tf.float32)[:, None])
  new_mu = l2_normalize((1 - eta) * mu + eta * l2_normalize(sums))
  r = tf.clip_by_value(tf.norm(sums, axis=1) / (counts + fedrg.EPS), 1e-6, 1 - 1e-6)
  new_kappa = (1 - eta) * kappa + eta * tf.clip_by_value(a_inverse(r, tf.shape(mu)[1]),
                                                         *fedrg.KAPPA_RANGE)
  prior = dp_alpha / num_components
  new_beta = (counts + prior) / (tf.reduce_sum(counts) + prior * num_components
                                 + fedrg.LOG_EPS)
  bg_prior = dp_alpha * fedrg.BACKGROUND_PRIOR
  new_pi0 = (background + bg_prior) / (tf.reduce_sum(counts) + background + bg_prior
                                       + fedrg.LOG_EPS)
  smoothed = per_class + dirichlet_smooth
  moved = (1 - eta) * m_map + eta * smoothed / (tf.reduce_sum(smoothed, 1, keepdims=True)
                                                + fedrg.LOG_EPS)
  moved = moved / (tf.reduce_sum(moved, 1, keepdims=True) + fedrg.LOG_EPS)
  return {'mu': new_mu, 'kappa': new_kappa, 'beta': (1 - eta) * beta + eta * new_beta,
          'pi0': tf.clip_by_value((1 - eta) * mixture['pi0'] + eta * new_pi0,
                                  *fedrg.PI0_RANGE),
          'm': tf.where(tf.reduce_sum(per_class) > 0, moved, m_map)}


def info_nce(projections, temperature=0.07):
  """``fedrg.info_nce``: SimCLR's loss per row [2B]."""
  f = tf.math.l2_normalize(projections, axis=1)
  n = tf.shape(f)[0]
  s = tf.matmul(f, f, transpose_b=True) / temperature
  s = tf.where(tf.eye(n, dtype=tf.bool), tf.fill(tf.shape(s), -float('inf')), s)
  partner = (tf.range(n) + n // 2) % n
  return tf.reduce_logsumexp(s, axis=1) - tf.gather(s, partner, batch_dims=1)
