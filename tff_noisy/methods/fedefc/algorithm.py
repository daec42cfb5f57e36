"""FedEFC (Yu, Ahn, Kang 2025): prestopping, then enhanced forward correction.

Stage 1 is FedAvg with cross-entropy. After each round the server's prestopping monitor
(``ops.prestop``, the paper's §3.1) reads the unweighted client mean of the accuracy on
the clients' own noisy labels: the received global model's before local training
(``signal: global``, the paper's Eq. 2, measured in its client part's ``start``) or the
running training accuracy (``training``, [code]; ``train_client_mean_accuracy``). Once
it has not improved for gamma monitored rounds (rounds after t_mon + 1, [code]'s timing;
after t_mon with ``monitor_from: paper``) the round is the prestopping point T_e and every
later round trains with the forward-corrected loss on each client's own Q^k
(``parts.py``). Nothing stops or rolls back.

``forward_correction`` is the same with Patrini's anchor estimate (the baseline). The
phase lives in the process state's hparams (broadcast: the clients read it), the
monitor's counters in its controller slot (server-only); a checkpoint keeps both, so a
resumed run switches exactly where the uninterrupted one does.

Diagnostics, in each round's record: ``prestop`` (the signal, best, counter, rule,
``monitor_from`` and T_e once it has fired). With ``report_matrix_error``, in the first
corrected round a probe re-estimates the round's clients' matrices with both estimators
(column-normalised, from the same global model and data as the parts' ``start``, FedEFC's
with its ``guess``) and the driver reports their L1 and cosine errors against the true
per-client matrices, which never reach the method.
"""

import collections

import numpy as np
import tensorflow as tf

from tff_noisy.federated import probe
from tff_noisy.federated import client_work
from tff_noisy.methods.fedefc import parts as fedefc_parts
from tff_noisy.methods.fedefc.diagnostics import TransitionEstimates
from tff_noisy.methods.recipe import Recipe, ServerStep
from tff_noisy.ops import prestop
from tff_noisy.ops import transition_tf

def _matrix_estimates(part: fedefc_parts.ForwardCorrection):
  """Statistic: the client's (confident-joint, anchor) matrices [C, C], as the part's
  ``start`` estimates them."""
  num_classes = part.num_classes

  def statistic(model, dataset):
    logits, labels = client_work.inference_pass(lambda x: model(x, training=False),
                                                dataset)
    probs = tf.nn.softmax(tf.reshape(logits, [-1, num_classes]))
    return (transition_tf.estimate_transition_matrix(probs, labels, num_classes,
                                                     guess=part.guess),
            transition_tf.anchor_transition_matrix(probs, part.anchor_percentile))

  return statistic


# The server's prestopping monitor (ops.prestop.Monitor), as its initial values.
MONITOR = collections.OrderedDict(
    monitor_best=np.float32(0.0), monitor_previous=np.float32(0.0),
    monitor_count=np.int32(0), switch_round=np.int32(-1))


class Prestopping(ServerStep):
  """After each round, the monitor's step on the round's signal (it may switch the
  clients to the corrected loss); before the first corrected round, optionally, the
  matrix estimates' probe."""

  def __init__(self, params):
    self.params = params
    self.matrix_probe = None

  def prepare(self, server) -> dict:
    if self.params.report_matrix_error and self.matrix_probe is None:
      setup = server.setup
      self.matrix_probe = probe.build_probe(
          setup.model_fn, setup.element_spec,
          _matrix_estimates(server.process.program.parts[0]),
          in_process=setup.probes_in_process)
    return {}

  @staticmethod
  def monitor(process, state) -> prestop.Monitor:
    monitor = process.get_controller(state)
    return prestop.Monitor(best=float(monitor['monitor_best']),
                           previous=float(monitor['monitor_previous']),
                           count=int(monitor['monitor_count']),
                           switch_round=int(monitor['switch_round']))

  def before(self, round_num, state, server):
    process = server.process
    switch_round = self.monitor(process, state).switch_round
    if self.matrix_probe is None or switch_round < 0 or round_num != switch_round + 1:
      return state, {}
    datasets = server.datasets()
    estimates = self.matrix_probe(process.get_model_weights(state), list(datasets.values()))
    return state, {'transition_estimates': TransitionEstimates({
        name: {cid: np.asarray(matrices[k]) for cid, matrices in zip(datasets, estimates)}
        for k, name in enumerate(fedefc_parts.ESTIMATORS)})}

  def after(self, round_num, state, server):
    params, process, metrics = self.params, server.process, server.metrics
    if params.signal == 'global':
      signal = metrics['objective']['received_accuracy']
    else:
      signal = metrics['train_client_mean_accuracy']
    before = self.monitor(process, state)
    after = prestop.step(before, signal, round_num, t_mon=params.t_mon, gamma=params.gamma,
                         rule=params.rule, monitor_from=params.monitor_from)
    state = process.set_hparams(state, {'corrected': int(after.switched)})
    state = process.set_controller(state, {
        'monitor_best': after.best, 'monitor_previous': after.previous,
        'monitor_count': after.count, 'switch_round': after.switch_round})
    return state, {'prestop': {
        'corrected': int(before.switched),  # The phase this round trained in.
        'signal': signal, 'signal_kind': params.signal, 'rule': params.rule,
        'monitor_from': params.monitor_from,
        'best': after.best, 'count': after.count,
        'switch_round': after.switch_round if after.switched else None}}


def fedefc(params, setup) -> Recipe:
  """Prestopping on the clients' noisy-label accuracy, then count-based forward correction."""
  return Recipe(parts=(fedefc_parts.ForwardCorrection(
      setup.num_classes, normalise=params.normalise, prior_comp=params.prior_comp,
      signal=params.signal, guess=params.guess),), server=(Prestopping(params),),
                controller=MONITOR)


def forward_correction(params, setup) -> Recipe:
  """Plain forward correction (Patrini et al. 2017) after the same prestopping switch."""
  return Recipe(parts=(fedefc_parts.ForwardCorrection(
      setup.num_classes, estimator='anchor', anchor_percentile=params.anchor_percentile,
      prior_comp=params.prior_comp, signal=params.signal),),
                server=(Prestopping(params),), controller=MONITOR)
