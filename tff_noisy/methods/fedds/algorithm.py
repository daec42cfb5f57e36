"""FedDS (Dong et al. 2026): Dawid-Skene client reliabilities as aggregation weights.

A round is split in federated computations, so that the server sees each client's model
(docs/papers/fedds.md, ambiguity 7): the process's client training (``train``, or the
configured client runtime) returns each client's update to the server;
``client_predictions`` labels the unlabelled public split with each local model (hard
argmax, Eq. 4); Dawid-Skene is fitted over the clients as annotators and the
process's ``aggregate`` applies the configured aggregator (``fl.aggregator``, the
weighted mean by default) with weights w_j = r_j / sum r (Eq. 8, r_j the mean diagonal
of client j's confusion matrix), then the finalizer. Local training is
unchanged (FedAvg, or FedProx for ``fedds_fedprox``). With ``em: central`` the
predictions come to the server, which fits ``ops.dawid_skene`` (the server holds every
participating client's model anyway, as in FedAvg without secure aggregation); with
``em: federated`` they stay at the clients and the server sees only summed EM terms.

Fewer than 2 usable clients: the round falls back to the base weighting (number of
examples) and says so in ``fedds_fallback``. A client whose update or public-set logits
are non-finite is an unreliable annotator: it gets weight 0, is left out of the EM and
is listed in ``fedds_unreliable_clients``.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import CrossEntropy, Proximal
from tff_noisy.methods.noisy_clients import ClientScores
from tff_noisy.methods.recipe import Recipe, ServerStep
from tff_noisy.ops import dawid_skene
from tff_noisy.ops import dawid_skene_tf as ds_tf
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def build_client_predictions(model_fn, public_x_shape):
  """``(weights@SERVER, public x@SERVER, updates@CLIENTS) -> <labels, finite>@CLIENTS``.

  Each client labels the broadcast public set with its local model (weights - update).
  """
  weights_type = client_work.weights_type_of(model_fn)
  public_type = tff.TensorType(np.float32, [None, *public_x_shape])

  @tff.tensorflow.computation(weights_type, weights_type, public_type)
  def predict(weights, update, public_x):
    model = model_fn()

    @tf.function  # Orders the weight assignment before the forward pass.
    def label(weights, update, public_x):
      local = tf.nest.map_structure(tf.subtract, weights, update)
      tf.nest.map_structure(lambda v, t: v.assign(t), client_work.model_weights_of(model),
                            local)
      logits = model(public_x, training=False)
      return tf.argmax(logits, axis=-1), tf.reduce_all(tf.math.is_finite(logits))

    return label(weights, update, public_x)

  @tff.federated_computation(tff.FederatedType(weights_type, tff.SERVER),
                             tff.FederatedType(public_type, tff.SERVER),
                             tff.FederatedType(weights_type, tff.CLIENTS))
  def client_predictions(weights, public_x, updates):
    return tff.federated_map(predict, (tff.federated_broadcast(weights), updates,
                                       tff.federated_broadcast(public_x)))

  return client_predictions


def build_federated_em(num_classes: int, num_public: int, smoothing: float):
  """Federated computations of a Dawid-Skene EM in which the server sees no prediction.

  Returns ``(init_counts, em_terms, reliabilities)``: the summed one-hot votes (for the
  majority-vote start), the summed E-step terms sum_j log m^(j)_{c, y_i^(j)} after each
  client's local M-step on the broadcast posteriors, and each client's reliability
  (Eq. 7) from its final local M-step. The server keeps posteriors and prior.
  """
  predictions_type = tff.TensorType(np.int64, [num_public])
  posteriors_type = tff.TensorType(np.float64, [num_public, num_classes])
  at_clients = tff.FederatedType(predictions_type, tff.CLIENTS)
  at_server = tff.FederatedType(posteriors_type, tff.SERVER)

  @tff.tensorflow.computation(predictions_type)
  def votes(predictions):
    return tf.one_hot(predictions, num_classes, dtype=tf.float64)

  @tff.tensorflow.computation(predictions_type, posteriors_type)
  def terms(predictions, posteriors):
    confusion = ds_tf.local_m_step(predictions, posteriors, smoothing)
    return ds_tf.local_log_likelihood_terms(predictions, confusion)

  @tff.tensorflow.computation(predictions_type, posteriors_type)
  def reliability(predictions, posteriors):
    return ds_tf.client_reliability(ds_tf.local_m_step(predictions, posteriors, smoothing))

  @tff.federated_computation(at_clients)
  def init_counts(predictions):
    return tff.federated_sum(tff.federated_map(votes, predictions))

  @tff.federated_computation(at_server, at_clients)
  def em_terms(posteriors, predictions):
    return tff.federated_sum(tff.federated_map(
        terms, (predictions, tff.federated_broadcast(posteriors))))

  @tff.federated_computation(at_server, at_clients)
  def reliabilities(posteriors, predictions):
    return tff.federated_map(reliability, (predictions, tff.federated_broadcast(posteriors)))

  return init_counts, em_terms, reliabilities


def federated_dawid_skene(computations, client_predictions: list, *, max_iter: int,
                          tol: float, use_prior: bool) -> tuple:
  """Runs ``dawid_skene``'s EM with the client steps in TFF; returns (reliabilities, its).

  The same arithmetic, step for step, as ``ops.dawid_skene.dawid_skene``.
  """
  init_counts, em_terms, reliabilities = computations
  posteriors = dawid_skene.majority_vote_posteriors(init_counts(client_predictions))
  for iteration in range(1, max_iter + 1):
    m_step_posteriors = posteriors
    posteriors, _ = dawid_skene.e_step_from_terms(
        em_terms(posteriors, client_predictions),
        dawid_skene.class_log_prior(posteriors, use_prior))
    if np.abs(posteriors - m_step_posteriors).max() < tol:
      break
  return np.array(reliabilities(m_step_posteriors, client_predictions)), iteration


class DawidSkeneWeighting(ServerStep):
  """The recipe's weighting (called before each round's aggregation) and the server step
  that prepares it: the public split and the computations that label it."""

  def __init__(self, params):
    self.params = params
    self.public_x = None
    self.num_classes = None
    self.client_predictions = None
    self.em = None  # Federated EM computations (em: federated).

  def prepare(self, server) -> dict:
    data = server.data
    if data.x_public is None or not len(data.x_public):
      raise ValueError('FedDS needs an unlabelled public split: set data.public_fraction '
                       '> 0 (the paper uses 0.1)')
    self.public_x = data.x_public.astype(np.float32)
    self.num_classes = data.num_classes
    model_fn = server.setup.model_fn  # The clients' model labels the public set.
    self.client_predictions = build_client_predictions(model_fn, data.input_shape)
    if self.params.em == 'federated':
      self.em = build_federated_em(data.num_classes, len(data.x_public),
                                   self.params.smoothing)
    client_work.restore_eager_model_classes(model_fn)
    return {'fedds_public_size': int(len(data.x_public)), 'fedds_em': self.params.em}

  def _predictions(self, results, global_weights) -> list:
    """Each client's public-set labels, or None for an unreliable client.

    A client the client work zeroed (update weight 0: a non-finite update) or whose
    public-set logits are non-finite is unreliable.
    """
    outputs = self.client_predictions(global_weights, self.public_x,
                                      [r.update for r in results])
    return [labels if finite and float(r.update_weight) > 0 else None
            for (labels, finite), r in zip(outputs, results)]

  def _reliabilities(self, predictions: list) -> tuple:
    settings = dict(max_iter=self.params.max_iter, tol=self.params.tol)
    if self.em is not None:
      return federated_dawid_skene(self.em, predictions, use_prior=self.params.use_prior,
                                   **settings)
    fit = dawid_skene.dawid_skene(np.stack(predictions), self.num_classes,
                                  prior=self.params.use_prior,
                                  smoothing=self.params.smoothing, **settings)
    return fit.reliability, fit.iterations

  def client_weights(self, client_ids, results, global_weights) -> tuple:
    """Aggregation weights of a round's clients and the diagnostics that explain them."""
    predictions = self._predictions(results, global_weights)
    usable = [cid for cid, p in zip(client_ids, predictions) if p is not None]
    diagnostics = {'fedds_unreliable_clients': [
        cid for cid, p in zip(client_ids, predictions) if p is None]}
    if len(usable) < 2:
      diagnostics['fedds_fallback'] = (
          f'{len(usable)} usable client(s): Dawid-Skene needs 2; weighted by examples')
      return np.array([float(r.update_weight) if cid in usable else 0.0
                       for cid, r in zip(client_ids, results)]), diagnostics
    reliability, iterations = self._reliabilities([p for p in predictions if p is not None])
    reliability = dict(zip(usable, reliability))
    scores = np.array([reliability.get(cid, 0.0) for cid in client_ids])
    if self.params.weight_mode == 'reliability_x_n':
      scores = scores * np.array([float(r.update_weight) for r in results])
    diagnostics.update(reliabilities=ClientScores(
        'reliabilities', 'reliability_correlation',
        {cid: float(r) for cid, r in reliability.items()}), fedds_em_iterations=iterations)
    return dawid_skene.reliability_weights(scores), diagnostics

  def __call__(self, round_num, state, client_ids, client_states, server):
    """The round's weights, as its server step before the aggregator.

    A Byzantine client's update is corrupted before it reaches the server, so its local
    model (global - update) labels the public set as the server would see it.
    """
    del round_num, state, client_states, server

    def weigh(results, global_weights):
      weights, diagnostics = self.client_weights(client_ids, results, global_weights)
      diagnostics['fedds_weights'] = {cid: float(w) for cid, w in zip(client_ids, weights)}
      return weights, diagnostics

    return weigh


def fedds(params, setup) -> Recipe:
  """FedAvg (or FedProx) local training with Dawid-Skene reliability weights."""
  del setup
  mu = getattr(params, 'mu', 0.0)  # FedDS over FedProx (fedds_fedprox).
  weighting = DawidSkeneWeighting(params)
  return Recipe(parts=(CrossEntropy(),) + ((Proximal(mu),) if mu else ()),
                weighting=weighting, server=(weighting,))
