"""Forward correction on the client: FedEFC's and plain forward correction's client part.

Two phases, set by the server through the ``corrected`` hparam (the prestopping switch,
``algorithm.py``; the paper's §3.1-3.2):

- stage 1 (``corrected`` 0): cross-entropy, as FedAvg;
- stage 2 (1): the part's ``start`` reads the just-received global model in inference mode over
  the client's whole local set and estimates the client's own Q^k[i, j] = p(noisy i |
  true j) from its probabilities and noisy labels: FedEFC's confident-joint counts
  (Eqs. 3-9; ``guess`` picks the true-class guess of an example with several confident
  classes, ``ops.transition.confident_joint``) or Patrini's anchors (the baseline),
  optionally prior-compensated [code].
  Local training then uses -log((Q^k softmax(z))_y + 1e-12) (Eqs. 14-16). Q^k is
  re-estimated every round and never leaves the client.

The same pass gives the received model's accuracy on the client's own noisy labels, the
paper's prestopping signal (Eq. 2), reported as the client mean ``received_accuracy``.
With the ``training`` signal ([code]'s running training accuracy, which the client work
reports anyway) stage 1 makes no extra pass. Every round also reports the fraction of
clients whose Q^k was singular (``matrix_singular``) and the mean number of its columns
whose diagonal count was clipped to 1 (``matrix_clipped_columns``; the regularisation
that keeps every column sum positive, a class no sample is guessed as included). The
forward loss never inverts Q^k, so a singular one is used as it is, and counted.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.federated.client_parts import ClientPart, DeviceForm, Needs
from tff_noisy.ops import losses
from tff_noisy.ops import transition
from tff_noisy.ops import transition_tf

ESTIMATORS = ('confident_joint', 'anchor')
SIGNALS = ('global', 'training')


def _own_label_accuracy(logits, labels):
  """The received model's accuracy on the client's own (noisy) labels (Eq. 2's signal)."""
  hits = tf.cast(tf.equal(tf.argmax(logits, axis=1), labels), tf.float32)
  return tf.reduce_sum(hits) / tf.maximum(tf.cast(tf.size(hits), tf.float32), 1.0)


def _corrected(hparams):
  """Whether the round is in stage 2 (the ``training`` signal's stage 1 reads nothing)."""
  return tf.equal(hparams['corrected'], 1)


class ForwardCorrection(ClientPart):
  """Cross-entropy, then the forward-corrected loss with the client's own Q^k."""

  def __init__(self, num_classes: int, *, estimator: str = 'confident_joint',
               normalise: str = 'column',
               anchor_percentile: float = 97.0, prior_comp: bool = False,
               signal: str = 'global', guess: str = 'passing'):
    for name, value, allowed in (('estimator', estimator, ESTIMATORS),
                                 ('normalise', normalise, transition.NORMALISATIONS),
                                 ('signal', signal, SIGNALS),
                                 ('guess', guess, transition.GUESSES)):
      if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    self.num_classes = int(num_classes)
    self.estimator = estimator
    self.normalise = normalise
    self.anchor_percentile = float(anchor_percentile)
    self.prior_comp = bool(prior_comp)
    self.signal = signal
    self.guess = guess
    self.hparams = collections.OrderedDict(corrected=np.int32(0))
    self.metric_names = (('received_accuracy',) if signal == 'global' else ()) + (
        'matrix_singular', 'matrix_clipped_columns')

  @property
  def needs(self) -> Needs:
    # Stackable: each example's corrected loss reads its own label and logits, and the
    # context only the received logits.
    return Needs(received_logits=True if self.signal == 'global' else _corrected,
                 metrics=self.metric_names, stackable=True)

  @property
  def device(self) -> DeviceForm:
    return DeviceForm(context={'matrix': np.eye(self.num_classes, dtype=np.float32)},
                      start=self._device_start, metrics=self._device_metrics)

  def _estimated(self, probs, labels):
    """``(Q^k as estimated, clipped columns)``: confident-joint counts (Eqs. 3-9) or anchors."""
    if self.estimator == 'anchor':
      return (transition_tf.anchor_transition_matrix(probs, self.anchor_percentile),
              tf.constant(0.0))
    counts = transition_tf.confident_joint(probs, labels, self.num_classes, self.guess)
    clipped = tf.reduce_sum(tf.cast(tf.linalg.diag_part(counts) < 1.0, tf.float32))
    return transition_tf.normalise_counts(counts, self.normalise), clipped

  def _applied(self, estimated, labels):
    """The matrix the loss applies: the estimate, prior-compensated with ``prior_comp``."""
    if not self.prior_comp:
      return estimated
    return transition_tf.compensate_prior(
        estimated, transition_tf.class_prior(labels, self.num_classes))

  def estimate(self, probs, labels):
    """``(matrix the loss applies, clipped columns, singular)`` from one client's pass."""
    estimated, clipped = self._estimated(probs, labels)
    singular = tf.cast(transition_tf.is_singular(estimated), tf.float32)
    return self._applied(estimated, labels), clipped, singular

  def start(self, ctx):
    for name, value in self._context(ctx.logits, ctx.labels, ctx.hparams).items():
      ctx[name] = value
      if name in self.metric_names:
        ctx.report(name, value)

  def _context(self, logits, labels, hparams):
    """Q^k (stage 2; the identity in stage 1) and what the round reports."""
    logits = tf.reshape(logits, [-1, self.num_classes])
    matrix, clipped, singular = tf.cond(
        tf.equal(hparams['corrected'], 1),
        lambda: self.estimate(tf.nn.softmax(logits), labels),
        lambda: (tf.eye(self.num_classes), tf.constant(0.0), tf.constant(0.0)))
    context = {'matrix': matrix, 'matrix_singular': singular,
               'matrix_clipped_columns': clipped}
    if self.signal == 'global':
      context['received_accuracy'] = _own_label_accuracy(logits, labels)
    return context

  def _device_start(self, predict, x, y, hparams):
    """The start over the whole local set at once; the singular flag is left to the
    host (``device_metrics``: its SVD is no TFLite op), which gets the matrix as
    estimated (``estimated``, before prior compensation) to test it."""
    logits = predict(x)
    labels = tf.cast(y, tf.int64)
    accuracy = _own_label_accuracy(logits, labels)

    def estimate():
      estimated, clipped = self._estimated(tf.nn.softmax(logits), labels)
      return estimated, self._applied(estimated, labels), clipped

    identity = tf.eye(self.num_classes)
    estimated, matrix, clipped = tf.cond(tf.equal(hparams['corrected'], 1), estimate,
                                         lambda: (identity, identity, tf.constant(0.0)))
    return {'matrix': matrix, 'estimated': estimated, 'received_accuracy': accuracy,
            'matrix_clipped_columns': clipped}

  def _device_metrics(self, outputs):
    values = {'received_accuracy': float(outputs['received_accuracy']),
              'matrix_clipped_columns': float(outputs['matrix_clipped_columns']),
              'matrix_singular': float(transition.is_singular(outputs['estimated']))}
    return {name: values[name] for name in self.metric_names}

  def loss(self, batch, out, ctx):
    # Both, then the phase's: the unselected loss adds exact zeros to the gradient, and
    # the stacked runtime's vectorisation (pfor) cannot take the gradient of a tf.cond.
    return tf.where(
        tf.equal(ctx.hparams['corrected'], 1),
        losses.forward_corrected_cross_entropy(batch['y'], out.logits, ctx['matrix']),
        losses.cross_entropy(batch['y'], out.logits))
