"""FedCorr (Xu et al., CVPR 2022): three stages over fl.rounds = T_1 + T_2 + T_3 (released
code Xu-Jingyi/FedCorr, ``main.py``).

- Pre-processing, rounds 1..T_1: each round is one of the paper's iterations. Every
  client takes part (the schedule's ``everyone``); its ``groups`` deal them, in an order
  drawn from (seed, round), into groups of max(⌊K·frac1⌋, 1) and runs one federated round
  per group, one after the other, each group starting from the model the previous one
  aggregated (the code's ``int(1/frac1)`` sub-rounds of ``int(K·frac1)`` clients), so
  every client trains once per iteration. A client trains on cross-entropy plus the
  adaptive proximal term β μ̂_k ‖w − w_g‖ (μ̂_k: its latest noise-level estimate, 0 in the
  first iteration) and returns its trained local model's probabilities on its examples
  (``parts.py``).
- After each iteration (the server step's ``after``, once the clients' outputs are stored): the
  server adds each client's LID score
  to its cumulative one; a GMM on the cumulative scores flags the noisy clients; each
  noisy client's noise level μ̂ comes from a GMM on its per-sample losses (clean: 0);
  of its ⌊n μ̂ r⌋ largest-loss samples, those on which the global model's largest
  probability exceeds the confidence threshold are relabelled with its argmax
  (``ops.fedcorr``). The labels, flags, μ̂ and cumulative scores are kept in the store
  (checkpointed).
- Fine-tuning, rounds T_1 + 1..T_1 + T_2: FedAvg without proximal term on the clients
  with μ̂ <= ``clean_threshold`` only (the schedule's ``eligible``: the config's sample among
  them, at most all of them). After round T_1 + T_2 (when T_2 > 0), every sample of the
  last iteration's noisy clients on which the fine-tuned global model is confident takes
  its argmax.
- Usual training, the last T_3 rounds: FedAvg on the config's sample with the corrected
  labels.
- Mixup (``params.mixup``, as every command line of the released code runs it): in all
  three stages each local step trains on its batch mixed with a permutation of itself
  (``parts.py``); the round's seed is drawn from (seed, round), each client's key is
  its place among the clients.

Where the released code and the paper differ, the code is followed: the per-sample loss
of the noise-level GMM is the last iteration's (the code resets its "accumulative" loss
every iteration); the proximal term is the norm, not its square. Not reproduced: the
code's skipping of the proximal term on each epoch's first batch (here its gradient is 0
where w = w_g, as on the first step), and its CE on softmax outputs for the losses (here
the model's CE, -log p_ŷ).

Reports: in each pre-processing round ``fedcorr_preprocessing`` (cumulative LID, μ̂, the
relabelled count per client) with ``noisy_clients``/``detection_truth`` (precision and
recall of the flags) and ``relabelling`` (flipped labels corrected, clean labels broken,
against the truth); ``fedcorr_clean_clients`` in fine-tuning; the fine-tuning
relabelling as ``relabelling`` in round T_1 + T_2.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.methods import contract
from tff_noisy.methods.contract import DataPlan, NoisyClients, Recipe, Schedule, ServerStep
from tff_noisy.methods.fedcorr import parts as fedcorr_parts
from tff_noisy.methods.fedcorr.diagnostics import Relabelling
from tff_noisy.ops import fedcorr as fedcorr_ops

CUMULATIVE_LID = 'fedcorr_cumulative_lid'
NOISY = 'fedcorr_noisy'
LABELS = 'labels'


def probabilities_statistic(model, dataset):
  """Probe statistic: the model's inference-mode probabilities on every example [n, C]."""
  return tf.nn.softmax(contract.probe_logits(model, dataset))


class FedCorrStages(ServerStep):
  """The three stages' server side: the hparams before each round, the pre-processing
  iterations' and fine-tuning's relabelling after them, and the schedule's choices."""

  def __init__(self, params, setup):
    self.params = params
    self.seed = setup.seed
    self.t1, self.t2, self.t3 = params.stage_lengths(setup.rounds)
    self.global_probs = None
    self.server = None  # The run's ServerContext, set by prepare.
    self._x = {}  # client id -> inputs, set by prepare.
    self._keys = {}  # client id -> its place among the clients (mixup's key).
    self._observed = {}  # client id -> observed labels.

  def prepare(self, server) -> dict:
    setup = server.setup
    if self.global_probs is None:
      self.global_probs = contract.build_probe(setup.model_fn, setup.element_spec,
                                               probabilities_statistic,
                                               in_process=setup.probes_in_process)
    self.server = server
    self._x = dict(server.data.x)
    self._keys = {cid: key for key, cid in enumerate(server.data.client_ids)}
    self._observed = dict(server.data.y)
    return {'fedcorr_stages': {'t1': self.t1, 't2': self.t2, 't3': self.t3}}

  def extras(self, client_id, num_examples, store) -> dict:
    del store
    if not self.params.mixup:
      return {}
    return {contract.MIX_KEY: np.full(num_examples, self._keys[client_id], np.int32)}

  def stage(self, round_num: int) -> int:
    """1 (pre-processing), 2 (fine-tuning) or 3 (usual training)."""
    return 1 if round_num <= self.t1 else 2 if round_num <= self.t1 + self.t2 else 3

  def everyone(self, round_num) -> bool:
    return self.stage(round_num) == 1

  def eligible(self, round_num, client_ids, store):
    if self.stage(round_num) != 2:
      return client_ids
    program = self.server.process.program
    return [cid for cid in client_ids if float(store.objective_state(
        cid, program, self._observed[cid])[fedcorr_parts.NOISE_LEVEL])
            <= self.params.clean_threshold]

  def before(self, round_num, state, server):
    first = self.stage(round_num) == 1
    hparams = {fedcorr_parts.PREPROCESSING: np.int32(first),
               fedcorr_parts.BETA: np.float32(self.params.beta if first else 0.0)}
    if self.params.mixup:
      hparams[contract.MIX_SEED] = contract.round_seed(self.seed, round_num)
    state = server.process.set_hparams(state, hparams)
    if self.stage(round_num) != 2:
      return state, {}
    return state, {'fedcorr_clean_clients': self.eligible(round_num, list(self._x),
                                                          server.store)}

  def groups(self, round_num, state, num_clients):
    """Pre-processing: the iteration's clients dealt, in an order drawn from (seed,
    round), into groups of max(⌊K·frac1⌋, 1) (module doc); later stages: one round."""
    if not self.server.process.get_hparams(state)[fedcorr_parts.PREPROCESSING]:
      return None
    group = max(int(num_clients * self.params.frac1), 1)
    order = np.random.default_rng([self.seed, round_num, 3]).permutation(num_clients)
    return [order[start:start + group] for start in range(0, len(order), group)]

  def after(self, round_num, state, server):
    store = server.store
    if self.stage(round_num) == 1:
      return state, self._after_iteration(round_num, state, store)
    if round_num == self.t1 + self.t2 and self.t2 > 0:
      return state, self._relabel_after_fine_tuning(state, store)
    return state, {}

  def _labels(self, store) -> dict:
    return {cid: store.get(cid, LABELS, y) for cid, y in self._observed.items()}

  def _global_probs(self, state, labels: dict, clients: list) -> dict:
    """The global model's probabilities on each of ``clients``' examples."""
    if not clients:
      return {}
    setup = self.server.setup
    outputs = self.global_probs(self.server.process.get_model_weights(state), [
        contract.ordered_dataset(
            self._x[cid], labels[cid], setup.batch_size, setup.element_spec,
            self.extras(cid, len(labels[cid]), None)) for cid in clients])
    return {cid: np.asarray(p, np.float64) for cid, p in zip(clients, outputs)}

  def _after_iteration(self, iteration, state, store) -> dict:
    """The server's step after pre-processing iteration ``iteration`` (module doc)."""
    params, program, seed = self.params, self.server.process.program, self.seed
    labels = self._labels(store)
    clients = [cid for cid in self._x if len(labels[cid])]
    outputs = {cid: store.objective_state(cid, program, self._observed[cid])
               for cid in clients}
    cumulative = {}
    for cid in clients:
      score = fedcorr_ops.client_lid(outputs[cid][fedcorr_parts.PROBS], params.lid_k)
      cumulative[cid] = store.get(cid, CUMULATIVE_LID, 0.0) + score
      store.set(cid, CUMULATIVE_LID, cumulative[cid])
    flags = dict(zip(clients, (bool(f) for f in fedcorr_ops.noisy_clients(
        [cumulative[cid] for cid in clients], seed))))
    noisy = [cid for cid in clients if flags[cid]]
    global_probs = self._global_probs(state, labels, noisy)
    levels, relabelled, changed = {}, {}, {}
    for cid in clients:
      losses = fedcorr_ops.sample_losses(outputs[cid][fedcorr_parts.PROBS], labels[cid])
      levels[cid] = fedcorr_ops.noise_level(losses, seed) if flags[cid] else 0.0
      if flags[cid]:
        result = fedcorr_ops.relabel(labels[cid], global_probs[cid], params.confidence,
                                     fedcorr_ops.relabel_candidates(losses, levels[cid],
                                                                    params.relabel_ratio))
        relabelled[cid] = result.labels
        changed[cid] = len(result.changed)
        store.set(cid, LABELS, result.labels)
      store.set(cid, NOISY, flags[cid])
      client = dict(outputs[cid])
      client[fedcorr_parts.NOISE_LEVEL] = np.float32(levels[cid])
      store.set_objective_state(cid, client)
    return {'fedcorr_preprocessing': {
        'iteration': iteration, 'cumulative_lid': cumulative, 'noise_levels': levels,
        'relabelled': changed},
            'noisy_clients': NoisyClients(flags),
            'relabelling': Relabelling(relabelled, self._observed)}

  def _relabel_after_fine_tuning(self, state, store) -> dict:
    labels = self._labels(store)
    noisy = [cid for cid in self._x if store.get(cid, NOISY, False) and len(labels[cid])]
    relabelled = {}
    for cid, probs in self._global_probs(state, labels, noisy).items():
      relabelled[cid] = fedcorr_ops.relabel(labels[cid], probs, self.params.confidence).labels
      store.set(cid, LABELS, relabelled[cid])
    return {'relabelling': Relabelling(relabelled, self._observed)}


def fedcorr(params, setup) -> Recipe:
  """Pre-processing iterations, fine-tuning on the clean clients, usual training."""
  stages = FedCorrStages(params, setup)
  loss = contract.Mixup(float(params.mixup_alpha)) if params.mixup else contract.CrossEntropy()
  return Recipe(
      parts=(fedcorr_parts.AdaptiveProximal(setup.num_classes), loss),
      data=DataPlan(fields={contract.MIX_KEY: (np.int32, ())} if params.mixup else {},
                    extras=stages.extras),
      schedule=Schedule(everyone=stages.everyone, eligible=stages.eligible,
                        groups=stages.groups),
      server=(stages,))
