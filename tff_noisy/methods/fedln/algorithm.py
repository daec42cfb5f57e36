"""FedLN (Tsouvalas et al. 2023): NNC label correction and NA-FedAvg aggregation.

NNC (once, on each client, before training): embed the client's inputs with a frozen
encoder and replace each label by the kNN majority vote of its neighbours' labels
(``ops.knn.knn_vote``, the paper's Eq. 1). NA-FedAvg: at the activation round R_c
every client scores its samples with the received global model and with its trained
local model (energy score); the server thresholds at the nu-th percentile of the pooled
global-model scores and a client's noise estimate n_hat is the fraction of its local
scores below it (Eq. 2). From R_c on the client's update weight is (1 - n_hat) N, which
reaches aggregation through the per-example ``aggregation_weight`` of its dataset.

Estimation is its own federated computation before the round's ``process.next``: clients
train from the same weights on the same data, so the local model scored is the one the
round aggregates. ``threshold: pooled`` (the paper) returns per-client logits to the
server; ``threshold: private`` sends only fixed-bin histograms of the global-model
scores and the scalar estimates (tau within one bin width of the pooled one).
"""

import numpy as np
import tensorflow as tf

from tff_noisy.embeddings import encoders
from tff_noisy.federated import client_work
from tff_noisy.federated import probe
from tff_noisy.methods.fedln.diagnostics import LabelCorrection, NoiseEstimates
from tff_noisy.methods.recipe import DataPlan, Recipe, Schedule, ServerStep
from tff_noisy.ops import energy
from tff_noisy.ops import energy_tf
from tff_noisy.ops import knn
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

NOISE_ESTIMATE = 'noise_estimate'


def _before_and_after_training(setup, program):
  """Statistic: (global-model logits, trained local-model logits) [N, C] on a client.

  The client trains exactly as its round's client work does (same optimiser, client parts
  and weight decay), so the local model scored is the one the round aggregates.
  """

  def statistic(model, dataset):
    train = client_work.build_local_training(model, setup.client_optimizer, program,
                                             setup.local_epochs, setup.weight_decay)
    global_logits = probe.logits_of(model, dataset)
    with tf.control_dependencies([global_logits]):
      received = tf.nest.map_structure(tf.identity, client_work.model_weights_of(model))
      train(received, dataset, {}, {})
    return global_logits, probe.logits_of(model, dataset)

  return statistic


def build_private_estimation(setup, program, *, temperature: float, nu: float,
                             score_range, num_bins: int):
  """``(global weights@SERVER, data@CLIENTS) -> <tau@SERVER, n_hat@CLIENTS>``.

  The private variant: clients send only a fixed-bin histogram of their global-model
  scores (summed by ``federated_sum``), the server broadcasts tau from the summed
  histogram and each client returns its scalar estimate.
  """
  client_logits = probe.build_client_statistic(
      setup.model_fn, setup.element_spec, _before_and_after_training(setup, program))
  weights_type, data_type = client_logits.type_signature.parameter
  low, high = (float(v) for v in score_range)

  @tff.tensorflow.computation(client_logits.type_signature.result)
  def client_scores(logits):
    return (energy_tf.energy_score(logits[0], temperature),
            energy_tf.energy_score(logits[1], temperature))

  scores_type = client_scores.type_signature.result

  @tff.tensorflow.computation(scores_type)
  def histogram(scores):
    return energy_tf.score_histogram(scores[0], low, high, num_bins)

  @tff.tensorflow.computation(histogram.type_signature.result)
  def threshold(counts):
    return energy_tf.threshold_from_histogram(counts, low, high, nu)

  @tff.tensorflow.computation(scores_type, threshold.type_signature.result)
  def estimate(scores, tau):
    return energy_tf.noise_estimate(scores[1], tau)

  @tff.federated_computation(tff.FederatedType(weights_type, tff.SERVER),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def private_estimate(weights, client_data):
    scores = tff.federated_map(client_scores, tff.federated_map(
        client_logits, (tff.federated_broadcast(weights), client_data)))
    tau = tff.federated_map(threshold, tff.federated_sum(tff.federated_map(histogram, scores)))
    return tau, tff.federated_map(estimate, (scores, tff.federated_broadcast(tau)))

  client_work.restore_eager_model_classes(setup.model_fn)
  return private_estimate


class NearestNeighbourCorrection(ServerStep):
  """NNC, once before training: each client's labels replaced by its kNN vote (stored as
  its ``labels``, which the data plan's default reads)."""

  def __init__(self, params, seed: int):
    self.params = params
    self.seed = seed

  def prepare(self, server) -> dict:
    data, store = server.data, server.store
    encoder, embeddings = encoders.embed_training_inputs(self.params, data, self.seed)
    corrected = {}
    start = 0
    for index, cid in enumerate(data.client_ids):
      n = len(data.y[cid])
      if n:
        corrected[cid] = knn.knn_vote(
            embeddings[start:start + n], data.y[cid], self.params.k,
            seed=self.seed * 100003 + index, num_classes=data.num_classes)
        store.set_derived(cid, 'labels', corrected[cid])
      start += n
    return {'nnc_encoder': encoder.encoder_id, 'label_correction': LabelCorrection(corrected)}


class NoiseEstimation(ServerStep):
  """NA-FedAvg: every client's noise estimate at the activation round R_c, before it
  trains; from then on its update weight is (1 - n_hat) N (``extras``)."""

  def __init__(self, params):
    self.params = params
    self.estimation = None

  def prepare(self, server) -> dict:
    if self.estimation is None:
      setup, program, params = server.setup, server.process.program, self.params
      if params.threshold == 'private':
        self.estimation = build_private_estimation(
            setup, program, temperature=params.temperature, nu=params.nu,
            score_range=params.score_range, num_bins=params.score_bins)
      else:
        self.estimation = probe.build_probe(
            setup.model_fn, setup.element_spec, _before_and_after_training(setup, program),
            in_process=setup.probes_in_process)
    return {}

  def everyone(self, round_num) -> bool:
    return round_num == self.params.activation_round

  @staticmethod
  def extras(client_id, num_examples, store) -> dict:
    estimate = store.get(client_id, NOISE_ESTIMATE, 0.0)
    return {client_work.AGGREGATION_WEIGHT_KEY:
            np.full(num_examples, 1.0 - estimate, np.float32)}

  def before(self, round_num, state, server):
    if not self.everyone(round_num):
      return state, {}
    datasets = server.datasets()
    weights = server.process.get_model_weights(state)
    if self.params.threshold == 'private':
      tau, values = self.estimation(weights, list(datasets.values()))
    else:
      logits = self.estimation(weights, list(datasets.values()))
      temperature = self.params.temperature
      tau = energy.pooled_threshold(
          [energy.energy_score(g, temperature) for g, _ in logits], self.params.nu)
      values = [energy.noise_estimate(energy.energy_score(local, temperature), tau)
                for _, local in logits]
    estimates = {cid: float(v) for cid, v in zip(datasets, values)}
    for cid, value in estimates.items():
      server.store.set(cid, NOISE_ESTIMATE, value)
    return state, {'noise_threshold': float(tau),
                   'noise_estimates': NoiseEstimates(estimates)}


def _fedln(params, setup, nnc: bool, na: bool) -> Recipe:
  """NNC and/or NA-FedAvg on top of FedAvg local training."""
  steps = (NearestNeighbourCorrection(params, setup.seed),) if nnc else ()
  if not na:
    return Recipe(server=steps)
  estimation = NoiseEstimation(params)
  return Recipe(
      data=DataPlan(fields={client_work.AGGREGATION_WEIGHT_KEY: (np.float32, ())},
                    extras=estimation.extras),
      schedule=Schedule(everyone=estimation.everyone), server=steps + (estimation,))


def fedln(params, setup) -> Recipe:
  return _fedln(params, setup, nnc=True, na=True)


def fedln_nnc(params, setup) -> Recipe:
  return _fedln(params, setup, nnc=True, na=False)


def fedln_nafedavg(params, setup) -> Recipe:
  return _fedln(params, setup, nnc=False, na=True)
