"""FedRN (Kim et al., CIKM 2022) as its released code runs it (github
ElvinKim/FedRN, ``main_fed_LNL.py``, ``LocalUpdateFedRN``; FNBench carries the same code).

- Every round a client trains the global model with cross-entropy and keeps its trained
  local model (``parts.LocalModel``; the store holds it between rounds, checkpointed).
  After the round the server computes, for each client that trained, its expertise E_j
  (accuracy of its local model on all of its examples against their observed labels,
  ``ops.fedrn.expertise``) and its output o_j on one Gaussian-noise input shared by all
  clients (drawn once from the run's seed), both in inference mode.
- Warm-up, rounds 1..T_w (the code's ``epoch < warmup_epochs``, 0-based): FedAvg.
- Round T > T_w, before client i trains (``ops.fedrn``, module doc): its reliability
  scores R_i· over the clients that have a local model, its k best neighbours, the GMM
  clean probability w of each example under its own last local model, each neighbour's
  linear head (the layer named ``logits``) fine-tuned by one pass of SGD over i's
  examples with w > τ (step size fl.client_lr, momentum ``head_momentum``,
  fl.weight_decay; batches of fl.batch_size in an order drawn from (seed, round, client))
  on the neighbour body's inference-mode features, the GMM of each fine-tuned neighbour's
  losses, and the R-weighted ensemble w̄; client i trains on the examples with w̄ > τ
  (``DataPlan.kept``; all of them when none passes), and its update keeps the weight of
  all of its n_i examples (each kept example's ``aggregation_weight`` is n_i / |kept|;
  the codes' FedAvg weighs a client by its data size).

The simulation runs client i's selection in this server step, on client i's examples (a
deployment sends client i its k neighbours' models instead): the probe gives each model's
features and logits of the client's examples (on TFF's clients with the ``tff`` runtime),
and the fine-tuning and the GMMs are NumPy (``ops.fedrn``, ``ops.dividemix``).

A client without a local model yet (it has not trained since the run began) is nobody's
neighbour and is left out of the min-max scaling; in an active round it trains on all of
its examples, as in warm-up (the code gives such a client expertise 0.5, a random probe
output and a freshly initialised network; see docs/methods.md).

Reports: ``fedrn_selection`` in every active round (``diagnostics.Selection``: the round's
clients' own-model and ensembled clean sets against the truth, and the true noise rate of
the chosen neighbours).
"""

import numpy as np
import tensorflow as tf

from tff_noisy.errors import ConfigError
from tff_noisy.methods import contract
from tff_noisy.methods.fedrn import parts
from tff_noisy.methods.fedrn.diagnostics import Selection
from tff_noisy.ops import dividemix
from tff_noisy.ops import fedrn as fedrn_ops

HEAD = 'logits'  # Every model's classification head (the model zoo's convention).
EXPERTISE = 'fedrn_expertise'
PROBE_OUTPUT = 'fedrn_probe_output'
CLEAN = 'fedrn_clean'
SELECTED_ROUND = 'fedrn_selected_round'
NOISE_SEED = 0xFED  # The shared noise input's stream, beside the run's seed.
# The dataset field whose sum over a client's examples is its update weight.
AGGREGATION_WEIGHT = contract.AGGREGATION_WEIGHT_KEY


def active(round_num: int, warmup_rounds: int) -> bool:
  """Whether round T = 1, 2, ... selects: T > T_w."""
  return round_num > warmup_rounds


def linear_head(model: tf.keras.Model) -> tuple:
  """Positions of the ``logits`` layer's kernel and bias among the model's weights
  (``ModelWeights`` flattened); ConfigError unless it is a linear Dense layer with a bias."""
  try:
    head = model.get_layer(HEAD)
  except ValueError:
    head = None
  if not (isinstance(head, tf.keras.layers.Dense) and head.use_bias and
          head.activation is tf.keras.activations.linear):
    raise ConfigError(f"model: FedRN fine-tunes the model's {HEAD!r} layer as a linear head; "
                      f'model {model.name!r} needs a Dense {HEAD!r} layer with a bias and no '
                      'activation')
  flat = tf.nest.flatten(contract.model_weights_of(model))
  position = {id(v): i for i, v in enumerate(flat)}
  return position[id(head.kernel)], position[id(head.bias)]


def features_and_logits(model_fn):
  """A builder of ``model_fn``'s model with outputs [the head's input, logits] (same
  variables, in the same order)."""

  def build():
    model = model_fn()
    return tf.keras.Model(model.inputs, [model.get_layer(HEAD).input, model.outputs[0]],
                          name=f'{model.name}_fedrn')

  return build


def outputs_statistic(noise: np.ndarray):
  """Probe statistic on the features-and-logits model: the client's features [n, D] and
  logits [n, C] in order, and the logits of ``noise`` [C], all in inference mode."""

  def statistic(model, dataset):
    features = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
    logits = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
    for batch in dataset:
      f, z = model(batch['x'], training=False)
      features = features.write(features.size(), f)
      logits = logits.write(logits.size(), z)
    _, noise_logits = model(tf.constant(noise), training=False)
    return features.concat(), logits.concat(), noise_logits[0]

  return statistic


def noise_input(input_shape, seed: int) -> np.ndarray:
  """The shared Gaussian-noise input [1, *input_shape] (the code's ``torch.randn``)."""
  return np.random.default_rng([seed, NOISE_SEED]).standard_normal(
      (1,) + tuple(input_shape)).astype(np.float32)


def head_batches(clean, batch_size, seed: int, round_num: int, key: int) -> list:
  """The fine-tuning batches: client ``key``'s clean positions in an order drawn from
  (seed, round, key), cut into batches of ``batch_size`` (None: one batch)."""
  order = np.random.default_rng([seed, round_num, key, 5]).permutation(np.flatnonzero(clean))
  size = batch_size or max(len(order), 1)
  return [order[start:start + size] for start in range(0, len(order), size)]


class NeighbourSelection(contract.ServerStep):
  """The round number for the clients; each round's clean sets before it (module doc);
  the trained clients' expertise and probe output after it."""

  def __init__(self, params, setup, num_weights: int, head: tuple):
    self.params = params
    self.warmup_rounds = params.warmup(setup.rounds)
    self.seed = int(setup.seed)
    self.names = parts.weight_names(num_weights)
    self.head = head
    self.probe = self.template = self.noise = None
    self.keys, self.sizes = {}, {}
    self.round = 0
    self.clients = []  # The round's clients with data, set before it.

  def prepare(self, server):
    ids = list(server.data.client_ids)
    if self.params.num_neighbors >= len(ids):
      raise ConfigError(f'method.params.num_neighbors: needs fewer neighbours than the '
                        f'{len(ids)} clients, got {self.params.num_neighbors}')
    setup = server.setup
    if self.probe is None:
      self.noise = noise_input(setup.element_spec['x'].shape[1:], self.seed)
      self.template = contract.model_weights_of(setup.model_fn())
      self.probe = contract.build_probe(features_and_logits(setup.model_fn),
                                        setup.element_spec, outputs_statistic(self.noise),
                                        in_process=setup.probes_in_process)
    self.keys = {cid: key for key, cid in enumerate(ids)}
    self.sizes = {cid: len(server.data.y[cid]) for cid in ids}
    return {}

  def extras(self, client_id, num_examples, store):
    """Each kept example's aggregation weight n_i / |kept|: the client's update weight is
    its number of examples n_i, whatever it keeps (the codes' FedAvg weights)."""
    del store
    return {AGGREGATION_WEIGHT: np.full(num_examples, self.sizes[client_id] / num_examples,
                                        np.float32)}

  def kept(self, client_id, store):
    """The round's clean positions of a client that selected them, else None (all)."""
    if store.get(client_id, SELECTED_ROUND, 0) != self.round:
      return None
    return np.flatnonzero(store.get(client_id, CLEAN))

  def _local_weights(self, state):
    return tf.nest.pack_sequence_as(self.template, [np.asarray(state[n]) for n in self.names])

  def _outputs(self, state, dataset) -> tuple:
    features, logits, noise = self.probe(self._local_weights(state), [dataset])[0]
    return (np.asarray(features, np.float64), np.asarray(logits, np.float64),
            np.asarray(noise, np.float64))

  def _dataset(self, server, cid):
    setup = server.setup
    labels = self._labels(server, cid)
    return contract.ordered_dataset(server.data.x[cid], labels, setup.batch_size,
                                    setup.element_spec,
                                    {AGGREGATION_WEIGHT: np.ones(len(labels), np.float32)})

  @staticmethod
  def _labels(server, cid):
    return np.asarray(contract.stored_labels(cid, server.data, server.store))

  def before(self, round_num, state, server):
    self.round = round_num
    self.clients = list(server.datasets())
    state = server.process.set_hparams(state, {parts.ROUND: np.float32(round_num)})
    if not active(round_num, self.warmup_rounds):
      return state, {'fedrn_active': False}
    store = server.store
    candidates = [cid for cid in server.data.client_ids
                  if store.get(cid, EXPERTISE) is not None]
    expertise = [store.get(cid, EXPERTISE) for cid in candidates]
    outputs = [store.get(cid, PROBE_OUTPUT) for cid in candidates]
    own, selected, neighbours, untrained = {}, {}, {}, []
    for cid in self.clients:
      if cid not in candidates:
        untrained.append(cid)
        continue
      at = candidates.index(cid)
      scores = fedrn_ops.reliability_scores(at, expertise, outputs, self.params.alpha)
      chosen = fedrn_ops.select_neighbors(at, scores, min(self.params.num_neighbors,
                                                          len(candidates) - 1))
      own[cid], selected[cid] = self._select(server, cid, [candidates[j] for j in chosen],
                                             scores[at], scores[chosen], round_num)
      neighbours[cid] = [candidates[j] for j in chosen]
      store.set(cid, CLEAN, selected[cid].astype(np.uint8))
      store.set(cid, SELECTED_ROUND, round_num)
    return state, {'fedrn_active': True,
                   'fedrn_selection': Selection(own, selected, neighbours, candidates,
                                                untrained)}

  def _select(self, server, cid, chosen, own_score, scores, round_num) -> tuple:
    """``(own clean set, ensembled clean set)`` of client ``cid`` (module doc)."""
    store, program, setup = server.store, server.process.program, server.setup
    labels, dataset = self._labels(server, cid), self._dataset(server, cid)
    _, logits, _ = self._outputs(store.objective_state(cid, program, labels), dataset)
    own_w = dividemix.clean_probability(fedrn_ops.cross_entropy(logits, labels), self.seed)
    own_clean = fedrn_ops.clean_mask(own_w, self.params.threshold)
    batches = head_batches(own_clean, setup.batch_size, self.seed, round_num, self.keys[cid])
    probabilities = [own_w]
    for neighbour in chosen:
      state = store.objective_state(neighbour, program, self._labels(server, neighbour))
      features, _, _ = self._outputs(state, dataset)
      kernel, bias = fedrn_ops.finetune_head(
          features, labels, state[self.names[self.head[0]]], state[self.names[self.head[1]]],
          batches, setup.client_lr, self.params.head_momentum, setup.weight_decay)
      losses = fedrn_ops.cross_entropy(features @ kernel + bias, labels)
      probabilities.append(dividemix.clean_probability(losses, self.seed))
    ensembled = fedrn_ops.ensemble_clean_probability(
        probabilities, np.concatenate([[own_score], scores]))
    return own_clean, fedrn_ops.clean_mask(ensembled, self.params.threshold)

  def after(self, round_num, state, server):
    """E_j and o_j of the round's clients whose local model is this round's (not one
    whose update was non-finite: it kept its state)."""
    store, program = server.store, server.process.program
    for cid in self.clients:
      labels = self._labels(server, cid)
      client = store.objective_state(cid, program, server.data.y[cid])
      if float(client[parts.TRAINED_ROUND]) != round_num:
        continue
      _, logits, noise = self._outputs(client, self._dataset(server, cid))
      store.set(cid, EXPERTISE, fedrn_ops.expertise(logits, labels))
      store.set(cid, PROBE_OUTPUT, noise)
    return state, {}


def fedrn(params, setup) -> contract.Recipe:
  """FedAvg's clients keeping their local models; the server's neighbour selection."""
  model = setup.model_fn()
  head = linear_head(model)
  shapes = [v.shape for v in tf.nest.flatten(contract.model_weights_of(model))]
  step = NeighbourSelection(params, setup, len(shapes), head)
  return contract.Recipe(parts=(contract.CrossEntropy(), parts.LocalModel(shapes)),
                         data=contract.DataPlan(fields={AGGREGATION_WEIGHT: (np.float32, ())},
                                                kept=step.kept, extras=step.extras),
                         server=(step,))
