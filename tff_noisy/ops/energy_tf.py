"""The private NA-FedAvg estimate's steps in TensorFlow, to run inside TFF computations.

TensorFlow twins of ``energy.energy_score``, ``score_histogram``,
``threshold_from_histograms`` and ``noise_estimate`` for fixed, uniform bins; tests hold
them equal to the NumPy versions. Clients histogram their global-model scores, the
server derives tau from the summed histogram and clients return only n_hat.
"""

import tensorflow as tf


def energy_score(logits, temperature: float = 1.0):
  """s(x) = T * log sum_c exp(f_c(x) / T) (Liu et al. 2020); [..., C] -> [...]."""
  return temperature * tf.reduce_logsumexp(logits / temperature, axis=-1)


def score_histogram(scores, low: float, high: float, num_bins: int):
  """Counts in ``num_bins`` uniform bins on [low, high]; outside scores go to the end bins."""
  return tf.histogram_fixed_width(scores, [low, high], nbins=num_bins, dtype=tf.int64)


def threshold_from_histogram(counts, low: float, high: float, nu: float):
  """tau_nu from summed counts, linear inside the bin holding the nu-th percentile."""
  counts = tf.cast(counts, tf.float64)
  width = (high - low) / tf.cast(tf.size(counts), tf.float64)
  cumulative = tf.cumsum(counts)
  target = nu / 100.0 * cumulative[-1]
  b = tf.searchsorted(cumulative, [target], side='left')[0]
  below = cumulative[b] - counts[b]
  return low + (tf.cast(b, tf.float64) + (target - below) / counts[b]) * width


def noise_estimate(local_scores, tau):
  """n_hat = (1/N) sum_i 1[s^L_i < tau] (FedLN Eq. 2, the fraction below tau)."""
  below = tf.cast(tf.cast(local_scores, tf.float64) < tau, tf.float64)
  return tf.reduce_mean(below)
