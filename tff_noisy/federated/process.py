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
  no Python step between them. ``FederatedProcess.next`` otherwise composes the round
  once from ``train`` (or the client runtime's training) and ``aggregate``, with an
  optional server step between them (FedDS's Dawid-Skene weights).

Built with ``faults=True`` (a config with simulated faults), ``train`` and ``next`` also
take each client's fault (``ops.faults_tf.FAULT_SPEC``) at CLIENTS, last: the client
work corrupts a Byzantine client's update before it leaves the client. Without, the
computations are exactly those of a run without faults.

The server state is a ``ServerState``: the slots of TFF's ``LearningAlgorithmState``
(what TFF's computations take and return) plus ``controller``. Its ``client_work`` slot
holds the client parts' hparams (``get_hparams``/``set_hparams``), broadcast to every
client each round; ``controller`` holds a method's server-only values
(``get_controller``/``set_controller``: FedEFC's prestopping monitor), which never leave
the server. A checkpoint of the state keeps both, so whatever the server decided for
later rounds survives a restart.
"""

import collections
import functools
from typing import Any, Callable, Mapping, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_work as client_work_lib
from tff_noisy.federated import finalizer as finalizer_lib
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


class ServerState(NamedTuple):
  """``tff.learning.templates.LearningAlgorithmState``'s slots, then ``controller``."""
  global_model_weights: Any
  distributor: Any
  client_work: Any  # The client parts' hparams: broadcast to every client each round.
  aggregator: Any
  finalizer: Any
  # A method's server-only values ({name: numpy scalar or array}), never broadcast. Last,
  # so that a state without any flattens (and checkpoints) as TFF's state does.
  controller: Any = collections.OrderedDict()

  def learning_state(self):
    """The part TFF's computations take: a ``LearningAlgorithmState``."""
    return tff.learning.templates.LearningAlgorithmState(*self[:5])


class RoundOutput(NamedTuple):
  state: object  # The new server state.
  metrics: dict  # {'client_work': {'train': ...}, 'aggregator': ..., 'finalizer': ...}
  client_states: list  # Each participating client's new state, in client order.
  diagnostics: dict = {}  # What the round's weighting hook and client runtime report.


class FederatedProcess:
  """A method's federated computations and plain accessors of their server state.

  ``clients`` is the client runtime (``tff_noisy.runtime``) chosen when the process is
  built: ``None`` for TFF's own client work (``train``), else an object whose
  ``train(weights, hparams, client_data, client_states, faults)`` returns what ``train``
  returns, computed elsewhere (in-process TensorFlow, the TFLite interpreter).
  """

  def __init__(self, initialize, build_train, build_aggregate, build_next,
               program: ClientProgram, takes_faults: bool = False, clients=None,
               finalize_in_process=None, aggregate_in_process=None,
               controller: Optional[Mapping] = None):
    """``build_train``, ``build_aggregate``, ``build_next``: each builds its computation
    once, when first used (``train``, ``aggregate``, ``next``)."""
    self.initialize_computation = initialize  # TFF's: the state but the controller.
    self.controller = collections.OrderedDict(
        (name, np.asarray(value)) for name, value in (controller or {}).items())
    self._build_train = build_train
    self._build_aggregate = build_aggregate
    self._build_next = build_next
    self.program = program
    self.takes_faults = takes_faults
    self.clients = clients
    # When the clients trained in this process: the aggregator as one tf.function over
    # their stacked updates (its ``in_process()``; None: TFF's ``aggregate``) and the
    # finalizer's server step (``finalizer.build_apply_update``).
    self.aggregate_in_process = aggregate_in_process if clients is not None else None
    self.finalize_in_process = finalize_in_process

  @property
  def train(self):
    """TFF's client work as one computation: ``(weights@SERVER, hparams@SERVER,
    data@CLIENTS, states@CLIENTS[, faults@CLIENTS]) -> <ClientResult@CLIENTS, metrics,
    states@CLIENTS>``."""
    return self._build_train()

  @property
  def aggregate(self):
    """``(aggregator state, finalizer state, weights@SERVER, updates@CLIENTS, update
    weights@CLIENTS) -> <aggregator state, finalizer state, weights, measurements>``."""
    return self._build_aggregate()

  @property
  def _next(self):
    """``train`` then ``aggregate`` as one computation on the ``LearningAlgorithmState``."""
    return self._build_next()

  def initialize(self) -> ServerState:
    """The server state before round 1 (TFF's ``initialize``, then the controller's
    initial values)."""
    return ServerState(*self.initialize_computation(), controller=collections.OrderedDict(
        (name, value.copy()) for name, value in self.controller.items()))

  def aggregated_in(self) -> str:
    """Where this process aggregates the clients' updates (results.json)."""
    return 'this process' if self.aggregate_in_process else 'TFF worker_binary (CPU)'

  def _faults(self, faults) -> tuple:
    """The trailing fault argument of ``train`` and ``next``: ``(faults,)`` or ``()``."""
    if self.takes_faults and faults is None:
      raise ValueError("this process was built with faults: give each client's fault")
    if not self.takes_faults and faults is not None:
      raise ValueError('this process was built without faults: give none')
    return () if faults is None else (list(faults),)

  def next(self, state, client_data: list, client_states: list,
           faults: Optional[list] = None,
           aggregation_weights: Optional[Callable] = None) -> RoundOutput:
    """One round on the participating clients' data, states and faults (same order).

    ``client_data``: ``ClientData`` (or, for a client runtime in this process, ``tf.data``
    datasets). ``aggregation_weights``:
    a server step between training and aggregation (FedDS's Dawid-Skene weights),
    ``(client results, global weights) -> (update weights, diagnostics)``; without it,
    each client's own update weight. With TFF's client work and no such step the round
    is the single computation ``next``; otherwise it is ``train_clients`` followed by
    ``aggregate``: the same configured aggregator and finalizer for every runtime. When
    the clients trained in this process and the aggregator has an in-process form
    (``aggregators.common``), their stacked updates are aggregated here, and the
    finalizer's step runs here too: the same rules, without shipping every update to
    TFF's worker.
    """
    if self.clients is None and aggregation_weights is None:
      new_state, metrics, client_states = self._next(
          state.learning_state(), _pipeline_inputs(client_data), client_states,
          *self._faults(faults))
      return RoundOutput(ServerState(*new_state, controller=state.controller), metrics,
                         client_states)
    weights = self.get_model_weights(state)
    results, train_metrics, client_states, diagnostics = self._train(
        weights, self.get_hparams(state), client_data, client_states, faults)
    if aggregation_weights is None:
      update_weights = list(client_work_lib.update_weights_of(results))
    else:
      update_weights, weighting = aggregation_weights(results, weights)
      update_weights = [np.float32(w) for w in update_weights]
      diagnostics = dict(diagnostics, **weighting)
    if self.aggregate_in_process:
      aggregated, aggregator_measurements = self.aggregate_in_process(
          client_work_lib.stacked_update_blocks(results), np.asarray(update_weights, np.float32))
      aggregator_state = state.aggregator  # Only stateless aggregators run in process.
      finalizer_state, new_weights, finalizer_measurements = tf.nest.map_structure(
          np.asarray, self.finalize_in_process(state.finalizer, weights, aggregated))
      measurements = collections.OrderedDict(aggregator=aggregator_measurements,
                                             finalizer=finalizer_measurements)
    else:
      aggregator_state, finalizer_state, new_weights, measurements = self.aggregate(
          state.aggregator, state.finalizer, weights, [r.update for r in results],
          update_weights)
    new_state = state._replace(global_model_weights=new_weights,
                               aggregator=aggregator_state, finalizer=finalizer_state)
    metrics = collections.OrderedDict(client_work={'train': train_metrics}, **measurements)
    return RoundOutput(new_state, metrics, client_states, diagnostics)

  def train_clients(self, weights, hparams, client_data: list, client_states: list,
                    faults: Optional[list] = None) -> tuple:
    """The clients' training alone: ``(ClientResults, finalized metrics, client states)``."""
    return self._train(weights, hparams, client_data, client_states, faults)[:3]

  def _train(self, weights, hparams, client_data, client_states, faults) -> tuple:
    """``train_clients`` plus what the client runtime reports of the round."""
    if self.clients is None:
      return (*self.train(weights, hparams, _pipeline_inputs(client_data), client_states,
                          *self._faults(faults)), {})
    self._faults(faults)  # The same checks.
    return self.clients.train(weights, hparams, client_data, client_states, faults)

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
    """``state`` with new hparams; every name the client parts declare, same dtypes."""
    return state._replace(client_work=_same_names_and_dtypes(
        hparams, self.program.hparams, "the client parts' hparams"))

  @staticmethod
  def get_controller(state) -> collections.OrderedDict:
    return state.controller

  def set_controller(self, state, controller: dict):
    """``state`` with new server-only values; every name the method declares, same
    dtypes and shapes."""
    return state._replace(controller=_same_names_and_dtypes(
        controller, self.controller, "the method's controller"))


def _pipeline_inputs(client_data) -> list:
  """Each ``ClientData``'s ``pipeline_input()``: what TFF's client work takes."""
  for client in client_data:
    if not isinstance(client, client_data_lib.ClientData):
      raise TypeError("TFF's client work takes each client's ClientData "
                      f'(client_data.make_client_data), not {type(client).__name__}')
  return [client.pipeline_input() for client in client_data]


def _same_names_and_dtypes(values: Mapping, expected: Mapping,
                           what: str) -> collections.OrderedDict:
  """``values`` in ``expected``'s order and dtypes; ValueError when the names differ."""
  if set(values) != set(expected):
    raise ValueError(f'{sorted(values)} differ from {what} {sorted(expected)}')
  converted = collections.OrderedDict(
      (name, np.asarray(values[name], np.asarray(expected[name]).dtype)) for name in expected)
  for name, value in converted.items():
    if value.shape != np.shape(expected[name]):
      raise ValueError(f'{what}: {name} has shape {value.shape}, not '
                       f'{np.shape(expected[name])}')
  return converted


def build_process(model_fn: Callable[[], tf.keras.Model], element_spec, client_optimizer,
                  server_optimizer=None, *, program: Optional[ClientProgram] = None,
                  model_aggregator=None, local_epochs: int = 1,
                  weight_decay: float = 0.0, faults: bool = False,
                  client_runtime: Optional[Callable] = None,
                  controller: Optional[Mapping] = None) -> FederatedProcess:
  """Builds a method's ``FederatedProcess``.

  Args:
    model_fn: No-arg callable returning a new uncompiled Keras model with logits out.
    element_spec: Element spec of a (batched) client dataset.
    client_optimizer: A ``tff.learning.optimizers.Optimizer`` for local training.
    server_optimizer: Applied to the aggregated update; default SGD with rate 1.0.
    program: The clients' ``ClientProgram``; default cross-entropy (FedAvg).
    model_aggregator: A weighted ``tff.aggregators`` factory; default weighted mean.
    local_epochs: Local passes over each client's data per round.
    weight_decay: Coupled L2 on the clients' trainable weights.
    faults: Whether ``train`` and ``next`` take each client's simulated fault.
    client_runtime: ``None`` (TFF's client work) or ``program -> client runtime``
      (``tff_noisy.runtime.build``): where the clients of ``next`` train.
    controller: The initial values of the method's server-only state
      (``ServerState.controller``), ``{name: numpy value}``; default none.
  """
  program = program or ClientProgram([CrossEntropy()])
  server_optimizer = server_optimizer or tff.learning.optimizers.build_sgdm(1.0)
  model_aggregator = model_aggregator or tff.aggregators.MeanFactory()
  weights_type = client_work_lib.weights_type_of(model_fn)
  aggregator = model_aggregator.create(weights_type, tff.TensorType(np.float32))
  finalizer = finalizer_lib.build_model_finalizer(weights_type, server_optimizer)
  initialize = _build_initialize(model_fn, program, aggregator, finalizer)
  # The computations below are built when first used: a client runtime in this process
  # trains without TFF's client work, and aggregates in process where the aggregator can,
  # so a run there never pays for tracing them.
  build_train = functools.cache(functools.partial(
      _build_train, model_fn, element_spec, client_optimizer, program, weights_type,
      local_epochs=local_epochs, weight_decay=weight_decay, faults=faults))
  build_aggregate = functools.cache(functools.partial(_build_aggregate, aggregator,
                                                      finalizer, weights_type))
  build_next = functools.cache(lambda: _build_next(initialize, *build_train(),
                                                   build_aggregate(), faults))
  if client_runtime is None:  # TFF's client work trains every round: built now.
    build_next()
  client_work_lib.restore_eager_model_classes(model_fn)
  clients = client_runtime(program) if client_runtime else None
  in_process = getattr(model_aggregator, 'in_process', None)
  return FederatedProcess(initialize, lambda: build_train()[0], build_aggregate, build_next,
                          program, faults, clients,
                          finalizer_lib.build_apply_update(server_optimizer),
                          in_process() if in_process else None, controller)


def _build_initialize(model_fn, program: ClientProgram, aggregator, finalizer):
  """``initialize() -> ServerState@SERVER``: the model's initial weights, the parts'
  initial hparams, the aggregator's and finalizer's initial states."""

  @tff.tensorflow.computation
  def initial_model_weights():
    return client_work_lib.model_weights_of(model_fn())

  @tff.tensorflow.computation
  def initial_hparams():
    return collections.OrderedDict(
        (name, tf.constant(value)) for name, value in program.hparams.items())

  @tff.federated_computation
  def initialize():
    return tff.federated_zip(tff.learning.templates.LearningAlgorithmState(
        global_model_weights=tff.federated_eval(initial_model_weights, tff.SERVER),
        distributor=tff.federated_value((), tff.SERVER),
        client_work=tff.federated_eval(initial_hparams, tff.SERVER),
        aggregator=aggregator.initialize(),
        finalizer=finalizer.initialize()))

  return initialize


def _build_train(model_fn, element_spec, client_optimizer, program: ClientProgram,
                 weights_type, *, local_epochs: int, weight_decay: float, faults: bool):
  """``(train, its CLIENTS-placed argument types)``: TFF's client work on every client
  (``train(weights, hparams, data, states[, faults])``)."""
  client_update = client_work_lib.build_client_update(
      model_fn, element_spec, client_optimizer, program, local_epochs=local_epochs,
      weight_decay=weight_decay, faults=faults)
  data_type, state_type, hparams_type, *fault_type = (
      client_update.type_signature.parameter[1:])
  at_clients = [tff.FederatedType(t, tff.CLIENTS) for t in (data_type, state_type,
                                                             *fault_type)]
  finalize_metrics = client_work_lib.build_finalize_client_metrics(
      client_update.type_signature.result[1])

  def train_clients(weights, hparams, client_data, client_states, client_faults):
    results, metrics, new_states = tff.federated_map(client_update, (
        tff.federated_broadcast(weights), client_data, client_states,
        tff.federated_broadcast(hparams), *client_faults))
    return (results, tff.federated_map(finalize_metrics, tff.federated_sum(metrics)),
            new_states)

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
  client_work_lib.restore_eager_model_classes(model_fn)  # Also when built later.
  return train, at_clients


def _build_aggregate(aggregator, finalizer, weights_type):
  """``aggregate(aggregator state, finalizer state, weights, updates@CLIENTS, update
  weights@CLIENTS)``: the configured aggregator, then the finalizer."""

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

  return aggregate


def _build_next(initialize, train, at_clients, aggregate, faults: bool):
  """``next(state, data, states[, faults])``: ``train`` then ``aggregate`` in one
  computation."""

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
  return next_fn
