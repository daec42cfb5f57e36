"""FedDiv (Li et al., AAAI 2024) as its released code runs it (lijichang/FLNL-FedDiv,
commit 918624c7, ``code release/main.py``; the maths in ``ops.feddiv``).

- Warm-up, rounds 1..T_w (the code's ``warmup_training_phase``): every client takes part
  (the schedule's ``everyone``); its ``groups`` deal them, in an order drawn from (seed,
  round), into groups of max(⌊K·frac1⌋, 1), one federated round per group from the model
  the previous one aggregated, on plain cross-entropy with the observed labels.
- Before each later round, on the round's clients (the server step's ``before``): the
  global model's probabilities on every example of each client (a probe, inference mode,
  the client's current labels), the filter losses min-max scaled, the global filter's
  clean / noisy split, and the sampler's relabelling and selection (``ops.feddiv.select``)
  from the de-biased labels the client's last local model left (at its first visit the
  global model's argmax). The new labels are stored (checkpointed: they persist as in the
  code, whose dataset keeps them), the selection is the data plan's ``kept`` for the round,
  and a client with at most B (fl.batch_size) selected examples sends the received model
  back (``parts.SendsReceivedWhenIdle``).
- The weighting, between the clients' training and the aggregation: each client's local
  model is the global model minus its update; a probe gives its probabilities on every
  example of the client (the code's ``get_output`` after local training); the update
  weights are the clients' sizes n_k (the code's FedAvg weights, whatever they trained on;
  0 for a non-finite update).
- After the round: each trained client's local filter (EM from the global filter on the
  local model's scaled losses), its de-biased labels and its class prior p̂ are stored;
  the global filter (the controller, checkpointed) becomes the aggregate of the latest
  local filter of every client that has fitted one (the code's ``server_cached_local_filter``,
  never cleared), weighted by the clients' sizes; the round's selections are cleared.

Records: ``feddiv_split`` (each client's estimated noise level, selected, relabelled and
whether it trained) with ``feddiv_selection`` (the clean split and the training set
against the truth) and ``feddiv_relabelling`` (the labels of every client visited so far
against the observed and the true ones) before each filtering round; ``feddiv_filter``
(the global filter) after it.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.methods.contract import DataPlan, Recipe, Schedule, ServerStep
from tff_noisy.methods.feddiv import parts as feddiv_parts
from tff_noisy.methods.feddiv.diagnostics import Relabelling, Selection
from tff_noisy.ops import feddiv as feddiv_ops

LABELS = 'labels'
KEPT = 'feddiv_kept'
DEBIASED = 'feddiv_debiased'
PRIOR = 'feddiv_prior'
VISITS = 'feddiv_visits'
LOCAL_FILTER = 'feddiv_local_filter'
GLOBAL_FILTER = 'feddiv_global_filter'
_NO_SELECTION = np.zeros(0, np.int64)


def probabilities_statistic(model, dataset):
  """Probe statistic: the model's inference-mode probabilities on every example [n, C]."""
  return tf.nn.softmax(contract.probe_logits(model, dataset))


def kept(client_id, store):
  """The data plan's ``kept``: the round's selection, None (every example) outside it."""
  positions = store.get(client_id, KEPT)
  return None if positions is None or not len(positions) else np.asarray(positions)


class FedDivSteps(ServerStep):
  """The warm-up schedule, the split and selection before each later round, the local
  models' outputs in the weighting, the filters after the round."""

  def __init__(self, params, setup):
    self.params = params
    self.seed = int(setup.seed)
    self.warmup = int(params.warmup_rounds)
    self.num_classes = int(setup.num_classes)
    self.probe = None
    self._data = self._setup = None  # The run's data and setup, set by prepare.
    self._local = {}  # client id -> its local model's probabilities, weighting to after.

  def prepare(self, server) -> dict:
    setup = server.setup
    if self.probe is None:
      self.probe = contract.build_probe(setup.model_fn, setup.element_spec,
                                        probabilities_statistic,
                                        in_process=setup.probes_in_process)
    self._data, self._setup = server.data, setup
    return {}

  def filtering(self, round_num: int) -> bool:
    return round_num > self.warmup

  def everyone(self, round_num) -> bool:
    return not self.filtering(round_num)

  def groups(self, round_num, state, num_clients):
    """Warm-up: every client, dealt in an order drawn from (seed, round) into groups of
    max(⌊K·frac1⌋, 1) (module doc); later rounds: one round."""
    del state
    if self.filtering(round_num):
      return None
    group = max(int(num_clients * self.params.warmup_fraction), 1)
    order = np.random.default_rng([self.seed, round_num, 3]).permutation(num_clients)
    return [order[start:start + group] for start in range(0, len(order), group)]

  def _labels(self, cid, store) -> np.ndarray:
    return np.asarray(store.get(cid, LABELS, self._data.y[cid]))

  def _probabilities(self, weights, labels: dict) -> dict:
    """``weights``' probabilities on every example of each client of ``labels``."""
    setup, cids = self._setup, list(labels)
    outputs = self.probe(weights, [contract.ordered_dataset(
        self._data.x[cid], labels[cid], setup.batch_size, setup.element_spec)
                                   for cid in cids])
    return {cid: np.asarray(p, np.float64) for cid, p in zip(cids, outputs)}

  def _losses(self, probs, labels):
    return feddiv_ops.scaled_losses(feddiv_ops.filter_losses(probs, labels,
                                                             self.params.filter_loss))

  def before(self, round_num, state, server):
    if not self.filtering(round_num):
      return state, {}
    params, store, process = self.params, server.store, server.process
    cids = list(server.datasets())  # The round's clients with data.
    labels = {cid: self._labels(cid, store) for cid in cids}
    global_probs = self._probabilities(process.get_model_weights(state), labels)
    noise_filter = np.asarray(process.get_controller(state)[GLOBAL_FILTER], np.float64)
    threshold = int(self._setup.batch_size or 0)
    record, clean, trained = {}, {}, {}
    for cid in cids:
      probs, visits = global_probs[cid], int(store.get(cid, VISITS, 0))
      split = feddiv_ops.split(self._losses(probs, labels[cid]), noise_filter,
                               params.clean_probability)
      debiased = (np.argmax(probs, axis=1) if visits == 0
                  else np.asarray(store.get(cid, DEBIASED)))
      chosen = feddiv_ops.select(
          labels[cid], probs, split.clean, split.noise_level, debiased, visits,
          confidence=params.confidence, clean_set_threshold=params.clean_set_threshold,
          relabel_threshold=params.relabel_threshold, sampler_start=params.sampler_start)
      trains = len(chosen.kept) > threshold
      store.set(cid, LABELS, chosen.labels)
      # An idle client trains on one example and sends the received model back.
      store.set(cid, KEPT, chosen.kept if trains else np.arange(1, dtype=np.int64))
      store.set_objective_state(cid, {feddiv_parts.TRAINS: np.float32(trains)})
      clean[cid], trained[cid] = split.clean, chosen.kept if trains else _NO_SELECTION
      record[cid] = {'noise_level': split.noise_level, 'visits': visits,
                     'selected': len(chosen.kept), 'relabelled': len(chosen.relabelled),
                     'trains': bool(trains)}
    visited = {cid: self._labels(cid, store) for cid in self._data.client_ids
               if store.get(cid, LABELS) is not None}
    return state, {
        'feddiv_split': record,
        'feddiv_selection': Selection(clean, {c: labels[c] for c in cids}, trained,
                                      {c: self._labels(c, store) for c in cids}),
        'feddiv_relabelling': Relabelling(visited)}

  def __call__(self, round_num, state, client_ids, client_states, server):
    """The recipe's weighting: the clients' sizes, the local models' outputs noted."""
    del state, client_states
    if not self.filtering(round_num):
      return None
    store = server.store

    def weigh(results, global_weights):
      flat = [np.asarray(w) for w in tf.nest.flatten(global_weights)]
      weights = []
      for cid, result in zip(client_ids, results):
        finite = float(result.update_weight) > 0  # A non-finite update: zeros, weight 0.
        weights.append(float(len(self._data.y[cid])) if finite else 0.0)
        if finite:  # The update is θ_global − θ_local.
          local = [w - np.asarray(u) for w, u in zip(flat, tf.nest.flatten(result.update))]
          self._local[cid] = self._probabilities(
              tf.nest.pack_sequence_as(global_weights, local),
              {cid: self._labels(cid, store)})[cid]
      return weights, {'feddiv_update_weights': dict(zip(client_ids, weights))}

    return weigh

  def after(self, round_num, state, server):
    if not self.filtering(round_num):
      return state, {}
    params, store, process = self.params, server.store, server.process
    noise_filter = np.asarray(process.get_controller(state)[GLOBAL_FILTER], np.float64)
    for cid, probs in self._local.items():
      local = feddiv_ops.local_filter(self._losses(probs, self._labels(cid, store)),
                                      noise_filter, params.filter_iterations)
      store.set(cid, LOCAL_FILTER, local)
      prior = np.asarray(store.get(cid, PRIOR, np.full(self.num_classes,
                                                       1.0 / self.num_classes)))
      debiased = feddiv_ops.debiased_probabilities(probs, prior, params.xi)
      store.set(cid, DEBIASED, np.argmax(debiased, axis=1).astype(np.int64))
      store.set(cid, PRIOR, feddiv_ops.update_prior(probs, debiased, prior,
                                                    params.prior_momentum,
                                                    params.prior_confidence))
      store.set(cid, VISITS, int(store.get(cid, VISITS, 0)) + 1)
    self._local = {}
    cached = [cid for cid in self._data.client_ids if store.get(cid, LOCAL_FILTER) is not None]
    if cached:
      noise_filter = feddiv_ops.aggregate_filters(
          [store.get(cid, LOCAL_FILTER) for cid in cached],
          [len(self._data.y[cid]) for cid in cached])
      state = process.set_controller(state, {GLOBAL_FILTER: noise_filter})
    for cid in self._data.client_ids:
      if store.get(cid, KEPT) is not None:
        store.set(cid, KEPT, _NO_SELECTION)
    return state, {'feddiv_filter': {
        'clients': len(cached), 'weights': noise_filter[feddiv_ops.WEIGHTS].tolist(),
        'means': noise_filter[feddiv_ops.MEANS].tolist(),
        'variances': noise_filter[feddiv_ops.VARIANCES].tolist()}}


def feddiv(params, setup) -> Recipe:
  """Warm-up, then the federated noise filter, the sampler and FedAvg on its selection."""
  steps = FedDivSteps(params, setup)
  return Recipe(
      parts=(feddiv_parts.SendsReceivedWhenIdle(), contract.CrossEntropy()),
      data=DataPlan(kept=kept),
      schedule=Schedule(everyone=steps.everyone, groups=steps.groups),
      weighting=steps, server=(steps,),
      controller={GLOBAL_FILTER: feddiv_ops.INITIAL_FILTER.copy()})
