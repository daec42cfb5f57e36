"""FedDS (Dong et al. 2026): Dawid-Skene client reliabilities as aggregation weights.

A round is split in two federated computations, the spec's TFF mapping
(specs/fedds.md §3): ``train`` broadcasts the global model and returns each client's
update to the server; the server rebuilds each local model, labels the unlabelled public
split with it (hard argmax, Eq. 4), fits Dawid-Skene over the clients as annotators
(``ops.dawid_skene``) and ``aggregate`` takes the weighted mean of the updates with
w_j = r_j / sum r (Eq. 8, r_j the mean diagonal of client j's confusion matrix) and
applies the finalizer. Local training is unchanged (FedAvg, or FedProx for
``fedds_fedprox``). What the server sees: every participating client's model (as in
FedAvg without secure aggregation) and the predictions it computes from them; the
clients never see the public set.

Fewer than 2 usable clients: the round falls back to the base weighting (number of
examples) and says so in ``fedds_fallback``. A client whose update or public-set logits
are non-finite is an unreliable annotator: it gets weight 0, is left out of the EM and
is listed in ``fedds_unreliable_clients``.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_work
from tff_noisy.federated import finalizer as finalizer_lib
from tff_noisy.federated.algorithms import base
from tff_noisy.federated.algorithms import fedavg
from tff_noisy.ops import dawid_skene
from tff_noisy.tff_runtime import import_tff

tff = import_tff()

_PREDICT_BATCH = 1024


def build_fedds_computations(model_fn, element_spec, client_optimizer, server_optimizer, *,
                             local_epochs: int, proximal_strength: float = 0.0):
  """Returns ``(train, aggregate)`` federated computations of a FedDS round.

  train: ``(weights@SERVER, data@CLIENTS) -> <ClientResult@CLIENTS, train metrics@SERVER>``.
  aggregate: ``(weights@SERVER, finalizer state@SERVER, updates@CLIENTS, w@CLIENTS)
  -> <finalizer state, new weights, measurements>@SERVER``.
  """
  weights_type = client_work.weights_type_of(model_fn)
  work = client_work.build_client_work(model_fn, element_spec, client_optimizer,
                                       proximal_strength=proximal_strength,
                                       local_epochs=local_epochs)
  finalizer = finalizer_lib.build_model_finalizer(weights_type, server_optimizer)
  data_type = work.next.type_signature.parameter[2]

  @tff.federated_computation(tff.FederatedType(weights_type, tff.SERVER), data_type)
  def train(weights, client_data):
    output = work.next(work.initialize(), tff.federated_broadcast(weights), client_data)
    return output.result, output.measurements

  @tff.federated_computation(
      tff.FederatedType(weights_type, tff.SERVER),
      finalizer.initialize.type_signature.result,
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(np.float32, tff.CLIENTS),
  )
  def aggregate(weights, finalizer_state, updates, client_weights):
    mean_update = tff.federated_mean(updates, weight=client_weights)
    output = finalizer.next(finalizer_state, weights, mean_update)
    return output.state, output.result, output.measurements

  return train, aggregate


class FedDS(base.Method):
  """FedAvg (or FedProx) local training with Dawid-Skene reliability weights."""

  def __init__(self, process, train, aggregate, model, params):
    super().__init__(process)
    self.train = train
    self.aggregate = aggregate
    self.model = model
    self.params = params
    self.public_x = None

  @classmethod
  def build(cls, params, model_fn, element_spec, client_optimizer, server_optimizer, *,
            local_epochs, seed, rounds):
    del seed, rounds
    mu = params.get('mu', 0.0)
    process = fedavg.build_fedavg_process(model_fn, element_spec, client_optimizer,
                                          server_optimizer, proximal_strength=mu,
                                          local_epochs=local_epochs)
    train, aggregate = build_fedds_computations(
        model_fn, element_spec, client_optimizer, server_optimizer,
        local_epochs=local_epochs, proximal_strength=mu)
    return cls(process, train, aggregate, model_fn(), params)

  def prepare(self, data, store) -> dict:
    del store
    if data.x_public is None or not len(data.x_public):
      raise ValueError('FedDS needs an unlabelled public split: set data.public_fraction '
                       '> 0 (the paper uses 0.1)')
    self.public_x = data.x_public
    return {'fedds_public_size': int(len(data.x_public))}

  def _public_predictions(self, global_weights, update):
    """Hard labels of the public set by the local model ``global - update``, or None."""
    local = tf.nest.map_structure(lambda g, u: g - u, global_weights, update)
    local.assign_weights_to(self.model)
    logits = self.model.predict(self.public_x, batch_size=_PREDICT_BATCH, verbose=0)
    if not np.all(np.isfinite(logits)):
      return None
    return np.argmax(logits, axis=-1)

  def client_weights(self, client_ids, results, global_weights) -> tuple:
    """Aggregation weights of a round's clients and the diagnostics that explain them."""
    predictions, usable, unreliable = [], [], []
    for cid, result in zip(client_ids, results):
      labels = None
      if float(result.update_weight) > 0:  # 0: the client work found a non-finite update.
        labels = self._public_predictions(global_weights, result.update)
      if labels is None:
        unreliable.append(cid)
      else:
        predictions.append(labels)
        usable.append(cid)
    diagnostics = {'fedds_unreliable_clients': unreliable}
    if len(usable) < 2:
      diagnostics['fedds_fallback'] = (
          f'{len(usable)} usable client(s): Dawid-Skene needs 2; weighted by examples')
      return np.array([float(r.update_weight) if cid in usable else 0.0
                       for cid, r in zip(client_ids, results)]), diagnostics
    fit = dawid_skene.dawid_skene(
        np.stack(predictions), self.model.output_shape[-1], max_iter=self.params['max_iter'],
        tol=self.params['tol'], prior=self.params['use_prior'],
        smoothing=self.params['smoothing'])
    reliability = dict(zip(usable, fit.reliability))
    scores = np.array([reliability.get(cid, 0.0) for cid in client_ids])
    if self.params['weight_mode'] == 'reliability_x_n':
      scores = scores * np.array([float(r.update_weight) for r in results])
    diagnostics.update(reliabilities={cid: float(r) for cid, r in reliability.items()},
                       fedds_em_iterations=fit.iterations)
    return dawid_skene.reliability_weights(scores), diagnostics

  def run_round(self, state, datasets):
    global_weights = self.process.get_model_weights(state)
    results, measurements = self.train(global_weights, list(datasets.values()))
    weights, diagnostics = self.client_weights(list(datasets), results, global_weights)
    finalizer_state, new_weights, finalizer_measurements = self.aggregate(
        global_weights, state.finalizer, [r.update for r in results],
        [np.float32(w) for w in weights])
    new_state = tff.learning.templates.LearningAlgorithmState(
        global_model_weights=new_weights, distributor=state.distributor,
        client_work=state.client_work, aggregator=state.aggregator,
        finalizer=finalizer_state)
    metrics = base.round_metrics({'client_work': measurements,
                                  'finalizer': finalizer_measurements})
    diagnostics['fedds_weights'] = {cid: float(w) for cid, w in zip(datasets, weights)}
    return new_state, metrics, diagnostics
