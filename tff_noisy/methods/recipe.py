"""A method is a ``Recipe``: a frozen value of a few slots, built by its folder's
``build(params, setup)``.

- ``parts``: its clients' side, an ordered list of ``ClientPart`` s (the shared ones in
  ``federated.client_parts``, its own in its folder's ``parts.py``);
- ``client_model``: the model the clients train and the server aggregates, from the
  configured one's builder (Co-teaching's two networks); None: the configured model;
- ``data``: what each client trains on (``DataPlan``: per-example fields, labels, kept
  examples, the fields' values);
- ``schedule``: which clients a round trains (``Schedule``: rounds that need every
  client, the clients a round samples from, sub-rounds);
- ``weighting``: the clients' aggregation weights when not the aggregator's own
  (FedDS's Dawid-Skene reliabilities, FedNoRo's DaAgg);
- ``server``: ``ServerStep`` s, each with a ``prepare`` before training and steps
  ``before`` and ``after`` every round (a phase the server decides, a probe, a control
  variate, a detection);
- ``controller``: server-only state the steps keep in the server state between rounds
  ({name: initial NumPy value}; checkpointed, never broadcast).

Methods combine by value: FedDS + SCAFFOLD is SCAFFOLD's recipe with FedDS's
weighting and server step added (``combine``). The engine
(``simulation.assembly`` and ``simulation.driver``) knows a method only through its
recipe; every slot defaults to FedAvg's.
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from tff_noisy.federated.client_parts import CrossEntropy


@dataclasses.dataclass(frozen=True)
class Setup:
  """What the config fixes for every method. A method's ``build`` receives it with
  ``model_fn`` the configured model's builder (no element spec, no client runtime yet);
  its server steps see the run's (``ServerContext.setup``): the clients' model (the
  recipe's ``client_model`` of it), their datasets' element spec and where they train."""
  model_fn: Callable
  element_spec: Any
  client_optimizer: Any
  server_optimizer: Any
  aggregator: Any  # A weighted tff.aggregators factory (fl.aggregator).
  local_epochs: int
  weight_decay: float
  seed: int
  rounds: int
  num_classes: int
  batch_size: Optional[int] = None  # fl.batch_size: examples per client batch.
  client_lr: Optional[float] = None  # fl.client_lr: the client optimiser's step size.
  faults: bool = False  # Simulated faults configured: the process takes each client's fault.
  # Where the clients train: ``program -> client runtime`` (``tff_noisy.runtime.build``),
  # or None for TFF's own client work.
  clients: Optional[Callable] = None
  # Whether a method's probes (``probe.build_probe``) run in this process: where its
  # clients train, unless that is TFF's worker.
  probes_in_process: bool = False


def stored_labels(client_id: str, data, store) -> np.ndarray:
  """The labels a client trains on: those its method stored (``'labels'``: NNC's, FedCorr's
  corrected ones), else the observed ones."""
  return store.get(client_id, 'labels', data.y[client_id])


@dataclasses.dataclass(frozen=True)
class DataPlan:
  """What a client's dataset holds beyond its inputs.

  ``fields``: per-example fields beyond x, y and index, ``{name: (numpy dtype, shape)}``,
  or a function of the federated data giving them (LSC's embedding width is its
  encoder's); they fix the clients' element spec. ``labels(client_id, data, store)``: the
  labels it trains on. ``kept(client_id, store)``: positions of the examples it trains on
  (None: all; Confident Learning drops its label issues). ``extras(client_id,
  num_examples, store)``: the per-example values of ``fields``.
  """
  fields: Any = dataclasses.field(default_factory=dict)
  labels: Callable = stored_labels
  kept: Optional[Callable] = None
  extras: Optional[Callable] = None

  def field_specs(self, data) -> dict:
    return dict(self.fields(data) if callable(self.fields) else self.fields)


def _never(round_num: int) -> bool:
  del round_num
  return False


@dataclasses.dataclass(frozen=True)
class Schedule:
  """Which clients a round trains.

  ``everyone(round_num)``: the round trains every client (no sampling, no dropouts).
  ``eligible(round_num, client_ids, store)``: the clients the round samples
  ``min(fl.clients_per_round, len(eligible))`` from (None: all). ``groups(round_num,
  state, num_clients)``: the round's clients split into sub-rounds, each a federated
  round from the model the previous one aggregated (a list of index arrays into the
  round's clients; None or a None result: one round).
  """
  everyone: Callable = _never
  eligible: Optional[Callable] = None
  groups: Optional[Callable] = None


class ServerStep:
  """The server's work around the rounds; each step may change the server state and
  returns diagnostics (``tff_noisy.diagnostics`` records are scored against the truth).

  ``server`` is the run's ``ServerContext``: its process, setup, data and client state
  store, and the round's ``datasets()`` (before) or ``metrics`` and ``outputs`` (after).
  """

  def prepare(self, server) -> dict:
    """Once before training, and again on resume (deterministically); ``results.extra``."""
    del server
    return {}

  def before(self, round_num: int, state, server) -> tuple:
    """Before round ``round_num`` trains: ``(state, diagnostics)``."""
    del round_num, server
    return state, {}

  def after(self, round_num: int, state, server) -> tuple:
    """Once the round's client states are in the store: ``(state, diagnostics)``."""
    del round_num, server
    return state, {}


@dataclasses.dataclass(frozen=True)
class ServerContext:
  """What a server step sees of its run. ``process``: the federated process (its
  ``get_hparams``/``set_hparams``, ``get_controller``/``set_controller``,
  ``get_model_weights``, ``program``); ``setup``: what the config fixes; ``data``: the
  federated data; ``store``: the clients' state between rounds. In a round:
  ``datasets()`` builds its clients' datasets (before), ``metrics`` are its metrics and
  ``outputs`` the sums of what its clients sent beside their updates (after)."""
  process: Any
  setup: Any
  data: Any
  store: Any
  datasets: Optional[Callable] = None
  metrics: Optional[dict] = None
  outputs: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class Recipe:
  """A method, as the engine runs it (module docstring).

  ``weighting(round_num, state, client_ids, client_states, server)`` returns None (the
  aggregator's own weights this round) or a hook ``(client results, global weights) ->
  (update weights, diagnostics)`` that runs between the clients' training and the
  aggregation (``FederatedProcess.next``'s ``aggregation_weights``).
  """
  parts: Sequence = (CrossEntropy(),)
  client_model: Optional[Callable] = None
  data: DataPlan = DataPlan()
  schedule: Schedule = Schedule()
  weighting: Optional[Callable] = None
  server: Sequence[ServerStep] = ()
  controller: Mapping = dataclasses.field(default_factory=dict)


def combine(recipe: Recipe, *, weighting: Recipe) -> Recipe:
  """``recipe`` aggregated with another recipe's weighting (FedDS's), whose server steps
  (what its weighting needs prepared) run after ``recipe``'s own."""
  if weighting.weighting is None:
    raise ValueError('combine: the weighting recipe has no weighting')
  return dataclasses.replace(recipe, weighting=weighting.weighting,
                             server=tuple(recipe.server) + tuple(weighting.server))
