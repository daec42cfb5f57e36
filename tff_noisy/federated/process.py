"""``FederatedProcess``: the learning process of every method, with per-client state.

TFF's ``LearningProcess`` cannot return a CLIENTS-placed value, and methods with client
state (MaskedOptim's label logits, a per-client counter) need one back each round. A
``FederatedProcess`` is the same composition as ``compose_learning_process`` (broadcast,
client work, a ``tff.aggregators`` factory, the model finalizer) written as federated
computations that also take and return the clients' states:

- ``train(weights, hparams, data, states) -> <ClientResult@CLIENTS, metrics, states@CLIENTS>``
- ``aggregate(aggregator state, finalizer state, weights, updates@CLIENTS,
  update weights@CLIENTS) -> <aggregator state, finalizer state, weights, measurements>``
- ``next(state, data, states)``: the two in one computation, for every round that needs
  no Python step between them. FedDS's split round calls ``train``, fits Dawid-Skene
  and calls ``aggregate`` with its own weights: the same pieces, the same aggregator.

Built with ``faults=True`` (a config with simulated faults), ``train`` and ``next`` also
take each client's fault (``ops.faults_tf.FAULT_SPEC``) at CLIENTS, last: the client
work corrupts a Byzantine client's update before it leaves the client. Without, the
computations are exactly those of a run without faults.

The server state is a ``tff.learning.templates.LearningAlgorithmState`` whose
``client_work`` part holds the objective's hparams (``get_hparams``/``set_hparams``), so
a checkpoint of the state keeps whatever the server decided for later rounds.
"""

import collections
from typing import Callable, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_work as client_work_lib
from tff_noisy.federated import finalizer as finalizer_lib
from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


class RoundOutput(NamedTuple):
  state: object  # The new server state.
  metrics: dict  # {'client_work': {'train': ...}, 'aggregator': ..., 'finalizer': ...}
  client_states: list  # Each participating client's new state, in client order.


class FederatedProcess:
  """A method's federated computations and plain accessors of their server state."""

  def __init__(self, initialize, train, aggregate, next_fn, objective: ClientObjective,
               takes_faults: bool = False):
    self.initialize = initialize
    self.train = train
    self.aggregate = aggregate
    self._next = next_fn
    self.objective = objective
    self.takes_faults = takes_faults

  def _faults(self, faults) -> tuple:
    """The trailing fault argument of ``train`` and ``next``: ``(faults,)`` or ``()``."""
    if self.takes_faults and faults is None:
      raise ValueError("this process was built with faults: give each client's fault")
    if not self.takes_faults and faults is not None:
      raise ValueError('this process was built without faults: give none')
    return () if faults is None else (list(faults),)

  def next(self, state, client_data: list, client_states: list,
           faults: Optional[list] = None) -> RoundOutput:
    """One round on the participating clients' datasets, states and faults (same order)."""
    return RoundOutput(*self._next(state, client_data, client_states, *self._faults(faults)))

  def train_clients(self, weights, hparams, client_data: list, client_states: list,
                    faults: Optional[list] = None) -> tuple:
    """``train`` on the participating clients (with their faults when built with faults)."""
    return self.train(weights, hparams, client_data, client_states, *self._faults(faults))

  @staticmethod
  def get_model_weights(state):
    return state.global_model_weights

  @staticmethod
  def set_model_weights(state, weights):
    return state._replace(global_model_weights=weights)

  @staticmethod
  def get_hparams(state) -> collections.OrderedDict:
    return state.client_work

  def set_hparams(self, state, hparams: dict):
    """``state`` with new hparams; every name the objective declares, same dtypes."""
    expected = self.objective.hparams
    if set(hparams) != set(expected):
      raise ValueError(f'hparams {sorted(hparams)} differ from the objective\'s '
                       f'{sorted(expected)}')
    values = collections.OrderedDict(
        (name, np.asarray(hparams[name], expected[name].dtype)) for name in expected)
    return state._replace(client_work=values)


def build_process(model_fn: Callable[[], tf.keras.Model], element_spec, client_optimizer,
                  server_optimizer=None, *, objective: ClientObjective = None,
                  model_aggregator=None, local_epochs: int = 1,
                  weight_decay: float = 0.0, faults: bool = False) -> FederatedProcess:
  """Builds a method's ``FederatedProcess``.

  Args:
    model_fn: No-arg callable returning a new uncompiled Keras model with logits out.
    element_spec: Element spec of a (batched) client dataset.
    client_optimizer: A ``tff.learning.optimizers.Optimizer`` for local training.
    server_optimizer: Applied to the aggregated update; default SGD with rate 1.0.
    objective: The clients' ``ClientObjective``; default cross-entropy (FedAvg).
    model_aggregator: A weighted ``tff.aggregators`` factory; default weighted mean.
    local_epochs: Local passes over each client's data per round.
    weight_decay: Coupled L2 on the clients' trainable weights.
    faults: Whether ``train`` and ``next`` take each client's simulated fault.
  """
  objective = objective or ClientObjective()
  server_optimizer = server_optimizer or tff.learning.optimizers.build_sgdm(1.0)
  model_aggregator = model_aggregator or tff.aggregators.MeanFactory()
  weights_type = client_work_lib.weights_type_of(model_fn)
  client_update = client_work_lib.build_client_update(
      model_fn, element_spec, client_optimizer, objective, local_epochs=local_epochs,
      weight_decay=weight_decay, faults=faults)
  data_type, state_type, hparams_type, *fault_type = client_update.type_signature.parameter[1:]
  at_clients = [tff.FederatedType(t, tff.CLIENTS) for t in (data_type, state_type, *fault_type)]
  finalize_metrics = client_work_lib.build_finalize_client_metrics(
      client_update.type_signature.result[1])
  aggregator = model_aggregator.create(weights_type, tff.TensorType(np.float32))
  finalizer = finalizer_lib.build_model_finalizer(weights_type, server_optimizer)

  @tff.tensorflow.computation
  def initial_model_weights():
    return client_work_lib.model_weights_of(model_fn())

  @tff.tensorflow.computation
  def initial_hparams():
    return collections.OrderedDict(
        (name, tf.constant(value)) for name, value in objective.hparams.items())

  @tff.federated_computation
  def initialize():
    return tff.federated_zip(tff.learning.templates.LearningAlgorithmState(
        global_model_weights=tff.federated_eval(initial_model_weights, tff.SERVER),
        distributor=tff.federated_value((), tff.SERVER),
        client_work=tff.federated_eval(initial_hparams, tff.SERVER),
        aggregator=aggregator.initialize(),
        finalizer=finalizer.initialize()))

  def train_clients(weights, hparams, client_data, client_states, client_faults):
    results, metrics, new_states = tff.federated_map(client_update, (
        tff.federated_broadcast(weights), client_data, client_states,
        tff.federated_broadcast(hparams), *client_faults))
    return results, tff.federated_map(finalize_metrics, tff.federated_sum(metrics)), new_states

  at_server = (tff.FederatedType(weights_type, tff.SERVER),
               tff.FederatedType(hparams_type, tff.SERVER))
  if faults:
    @tff.federated_computation(*at_server, *at_clients)
    def train(weights, hparams, client_data, client_states, client_faults):
      return train_clients(weights, hparams, client_data, client_states, (client_faults,))
  else:
    @tff.federated_computation(*at_server, *at_clients)
    def train(weights, hparams, client_data, client_states):
      return train_clients(weights, hparams, client_data, client_states, ())

  @tff.federated_computation(
      aggregator.initialize.type_signature.result,
      finalizer.initialize.type_signature.result,
      tff.FederatedType(weights_type, tff.SERVER),
      tff.FederatedType(weights_type, tff.CLIENTS),
      tff.FederatedType(np.float32, tff.CLIENTS))
  def aggregate(aggregator_state, finalizer_state, weights, updates, update_weights):
    aggregated = aggregator.next(aggregator_state, updates, update_weights)
    finalized = finalizer.next(finalizer_state, weights, aggregated.result)
    return (aggregated.state, finalized.state, finalized.result,
            tff.federated_zip(collections.OrderedDict(
                aggregator=aggregated.measurements, finalizer=finalized.measurements)))

  def round_of(state, client_data, client_states, client_faults):
    results, train_metrics, new_states = train(
        state.global_model_weights, state.client_work, client_data, client_states,
        *client_faults)
    aggregator_state, finalizer_state, new_weights, measurements = aggregate(
        state.aggregator, state.finalizer, state.global_model_weights, results.update,
        results.update_weight)
    new_state = tff.federated_zip(tff.learning.templates.LearningAlgorithmState(
        global_model_weights=new_weights, distributor=state.distributor,
        client_work=state.client_work, aggregator=aggregator_state,
        finalizer=finalizer_state))
    metrics = tff.federated_zip(collections.OrderedDict(
        client_work=collections.OrderedDict(train=train_metrics),
        aggregator=measurements.aggregator, finalizer=measurements.finalizer))
    return new_state, metrics, new_states

  if faults:
    @tff.federated_computation(initialize.type_signature.result, *at_clients)
    def next_fn(state, client_data, client_states, client_faults):
      return round_of(state, client_data, client_states, (client_faults,))
  else:
    @tff.federated_computation(initialize.type_signature.result, *at_clients)
    def next_fn(state, client_data, client_states):
      return round_of(state, client_data, client_states, ())

  client_work_lib.restore_eager_model_classes(model_fn)
  return FederatedProcess(initialize, train, aggregate, next_fn, objective, faults)
