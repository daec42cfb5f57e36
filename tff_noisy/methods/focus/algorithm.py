"""FOCUS (Chen et al. 2020, arXiv 2001.11359): credibility-weighted aggregation with a
clean labelled benchmark set on the server (``ops.focus``).

Local training is FedAvg's. Each round, before its clients train, a probe runs the model
they receive on each one's own labels: LL_k, the loss a FOCUS client reports (the probe
runs where the client runtime runs probes). After training the server evaluates each
local model (global weights - update) on its benchmark, the public split with its clean
labels (``data.public_fraction``; ``FederatedData.y_public``), in this process: LS_k. The
weights are ``ops.focus.weights`` of the two; the configured aggregator applies them
(``fl.aggregator``, the weighted mean by default).

A client whose update the client work zeroed (non-finite: update weight 0) or whose loss
is non-finite gets weight 0 and no credibility. Records per round: ``focus_credibility``
(C_k, scored against 1 - the true noise rate), ``focus_losses`` (LL_k and LS_k) and
``focus_weights``; ``focus_fallback`` when fewer than 2 clients were usable.
"""

import numpy as np
import tensorflow as tf

from tff_noisy.federated import probe
from tff_noisy.federated.client_parts import CrossEntropy
from tff_noisy.methods.client_detection import ordered_dataset
from tff_noisy.methods.noisy_clients import ClientScores
from tff_noisy.methods.recipe import Recipe, ServerStep, stored_labels
from tff_noisy.ops import focus as focus_ops


def mean_cross_entropy(model, dataset):
  """Probe statistic: the model's mean cross-entropy on the dataset's labels, in
  inference mode (NaN for an empty dataset)."""
  total = tf.constant(0.0)
  count = tf.constant(0.0)
  for batch in dataset:
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch['y'], model(batch['x'], training=False))
    total += tf.reduce_sum(losses)
    count += tf.cast(tf.size(losses), tf.float32)
  return total / count


class CredibilityWeighting(ServerStep):
  """The recipe's weighting and the server step that prepares its probes and benchmark."""

  def __init__(self, params):
    self.params = params
    self.local_data_loss = None  # Probe: the received model on the clients' labels.
    self.benchmark_loss = None  # The server's: a model on its benchmark set.
    self.benchmark = None

  def prepare(self, server) -> dict:
    data, setup = server.data, server.setup
    if data.x_public is None or not len(data.x_public) or data.y_public is None:
      raise ValueError('FOCUS needs a clean labelled public set on the server: set '
                       'data.public_fraction > 0 (FedDS uses 0.1)')
    if self.local_data_loss is None:
      self.local_data_loss = probe.build_probe(setup.model_fn, setup.element_spec,
                                               mean_cross_entropy,
                                               in_process=setup.probes_in_process)
      self.benchmark_loss = probe.build_probe(setup.model_fn, setup.element_spec,
                                              mean_cross_entropy, in_process=True)
    self.benchmark = ordered_dataset(data.x_public, data.y_public, setup.batch_size,
                                     setup.element_spec)
    return {'focus_benchmark_size': int(len(data.y_public))}

  def __call__(self, round_num, state, client_ids, client_states, server):
    """Before the round trains: the received model's loss on each client's labels; the
    returned hook weighs the trained clients."""
    del round_num, client_states
    data, setup = server.data, server.setup
    datasets = [ordered_dataset(data.x[cid], stored_labels(cid, data, server.store),
                                setup.batch_size, setup.element_spec) for cid in client_ids]
    local_data_losses = [float(v) for v in self.local_data_loss(
        server.process.get_model_weights(state), datasets)]

    def weigh(results, global_weights):
      # FOCUS's parts leave the update unscaled, so global - update is the local model.
      benchmark_losses = [
          float(self.benchmark_loss(tf.nest.map_structure(np.subtract, global_weights,
                                                          r.update), [self.benchmark])[0])
          if float(r.update_weight) > 0 else np.nan for r in results]
      result = focus_ops.weights(local_data_losses, benchmark_losses,
                                 [float(r.update_weight) for r in results],
                                 alpha=self.params.alpha,
                                 times_examples=self.params.times_examples)
      usable = [(cid, float(c)) for cid, c in zip(client_ids, result.credibility)
                if np.isfinite(c)]
      diagnostics = {
          'focus_credibility': ClientScores('focus_credibility',
                                            'focus_credibility_correlation', dict(usable)),
          'focus_losses': {cid: {'local_data': ll, 'benchmark': ls} for cid, ll, ls in zip(
              client_ids, local_data_losses, benchmark_losses)},
          'focus_weights': {cid: float(w) for cid, w in zip(client_ids, result.weights)}}
      if result.status != focus_ops.OK:
        diagnostics['focus_fallback'] = result.status
      return result.weights, diagnostics

    return weigh


def focus(params, setup) -> Recipe:
  """FedAvg's local training with FOCUS's credibility weights."""
  del setup
  weighting = CredibilityWeighting(params)
  return Recipe(parts=(CrossEntropy(),), weighting=weighting, server=(weighting,))
