"""Noisy-client detection by per-class losses and a GMM vote, shared by MaskedOptim and
FedNoRo (which introduced it: Wu et al. 2023, stage 1).

With the global model after warm-up, a probe runs on *every* client with data (not only
a round's sample) and returns its per-class mean cross-entropy in inference mode (NaN for
a class it lacks); the server fills, scales and votes over two-component GMM fits
(``ops.detection``). Fewer than 2 clients, or a vote with one side empty, flag nobody
(the record's ``status`` says why). ``NoisyClientDetection`` is the server step that runs
the detection once and fixes each client's flag in its client-part state;
``daagg_weighting`` is FedNoRo's distance-aware aggregation of the flagged clients'
updates (Wu et al. 2023, stage 2), which FedELC reuses.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.federated import probe
from tff_noisy.methods.noisy_clients import DaAggWeights
from tff_noisy.methods.recipe import ServerStep, stored_labels
from tff_noisy.ops import detection
from tff_noisy.ops import detection_tf
from tff_noisy.ops import fednoro


def class_loss_statistic(num_classes: int):
  """Probe statistic: the client's per-class mean CE under the global model [C]."""

  def statistic(model, dataset):
    return detection_tf.class_mean_losses(lambda x: model(x, training=False), dataset,
                                          num_classes)

  return statistic


def ordered_dataset(x, y, batch_size, element_spec, extras=None) -> tf.data.Dataset:
  """A client's whole set in order, batched like training (``batch_size`` None: one
  batch), for a probe; ``element_spec`` is the training data's, which it must match
  (``extras``: the method's own per-example fields, its ``DataPlan.extras``)."""
  dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=np.asarray(x, np.float32), y=np.asarray(y, np.int64),
      index=np.arange(len(y), dtype=np.int64), **(extras or {}))).batch(
          batch_size or len(y))
  if dataset.element_spec != element_spec:
    raise ValueError(f'probe dataset {dataset.element_spec} differs from the training '
                     f'data {element_spec}')
  return dataset


class ClassLossDetection:
  """``detect(weights, clients)``: which clients are noisy, from the global ``weights``."""

  def __init__(self, setup, fits: int):
    self.setup = setup
    self.fits = fits
    self.probe = probe.build_probe(setup.model_fn, setup.element_spec,
                                   class_loss_statistic(setup.num_classes),
                                   in_process=setup.probes_in_process)

  def detect(self, weights, clients: dict) -> tuple:
    """``({client id: flagged}, record)`` for ``clients`` ``{id: (x, observed y)}``; only
    clients with data are probed (and flagged)."""
    probed = [cid for cid, (_, y) in clients.items() if len(y)]
    class_losses = np.full((len(probed), self.setup.num_classes), np.nan)
    if len(probed) >= 2:  # Fewer: ``vote`` flags nobody and says so.
      class_losses = np.stack([np.asarray(v, np.float64) for v in self.probe(
          weights, [ordered_dataset(*clients[cid], self.setup.batch_size,
                                    self.setup.element_spec) for cid in probed])])
    result = detection.vote(class_losses, self.fits)
    flags = dict(zip(probed, (bool(f) for f in result.noisy)))
    return flags, {
        'status': result.status, 'probed_clients': len(probed),
        'flagged': [c for c in probed if flags[c]],
        'agreeing_fits': result.agreeing_fits, 'fits': result.fits,
        'class_losses': {cid: [None if np.isnan(v) else float(v) for v in row]
                         for cid, row in zip(probed, class_losses)}}


class NoisyClientDetection(ServerStep):
  """Flags the noisy clients once, before round ``detection_round`` (T_w + 1,
  ``params.warmup_rounds``; ``params.gmm_fits`` GMM fits), with the global model after
  warm-up, and keeps each flag in the client's part state under ``flag`` (checkpointed
  with the store, so a resumed run does not detect again). A method's own step calls
  ``detect`` in its ``before``."""

  def __init__(self, params, flag: str):
    self.params = params
    self.flag = flag
    self.detection = None
    self.clients = {}  # client id -> (inputs, observed labels), set by prepare.

  @property
  def detection_round(self) -> int:
    """The first round after detection: T_w + 1."""
    return self.params.warmup_rounds + 1

  def prepare(self, server) -> dict:
    if self.detection is None:
      self.detection = ClassLossDetection(server.setup, self.params.gmm_fits)
    data = server.data
    self.clients = {cid: (data.x[cid], stored_labels(cid, data, server.store))
                    for cid in data.client_ids}
    return {}

  def detect(self, state, server) -> tuple:
    """``({client id: flagged}, the detection record)``: the vote on every client with
    data; each client's part state restarts from ``initial_state`` with its flag."""
    flags, record = self.detection.detect(server.process.get_model_weights(state),
                                          self.clients)
    program = server.process.program
    for cid, (_, y) in self.clients.items():
      client = program.initial_state(y)
      client[self.flag] = np.int32(flags.get(cid, False))
      server.store.set_objective_state(cid, client)
    return flags, {'after_round': self.params.warmup_rounds, **record}


def daagg_weighting(client_ids, noisy):
  """The weighting hook ``(results, global weights) -> (weights, diagnostics)`` of a
  round whose clients ``client_ids`` are flagged ``noisy``: DaAgg's weights
  (``ops.fednoro.daagg_weights``: n_k exp(−D_k) on the noisy clients, D_k their update's
  normalised distance to the nearest clean one), with the ``daagg`` record and
  ``daagg_weights`` (``noisy_clients.DaAggWeights``)."""

  def weigh(results, global_weights):
    del global_weights
    sizes = [float(r.update_weight) for r in results]
    daagg = fednoro.daagg_weights(
        sizes, noisy, [[np.asarray(u) for u in tf.nest.flatten(r.update)] for r in results])
    weights = dict(zip(client_ids, (float(w) for w in daagg.weights)))
    return daagg.weights, {
        'daagg': {'status': daagg.status,
                  'distances': dict(zip(client_ids, (float(d) for d in daagg.distances)))},
        'daagg_weights': DaAggWeights(weights, dict(zip(client_ids, sizes)))}

  return weigh
