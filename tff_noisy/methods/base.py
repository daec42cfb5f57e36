"""``Method``: a method's learning process plus the driver hooks a method may need around it.

A method is its client parts (its client side, ``client_parts``: an ordered list of
``federated.client_parts.ClientPart``), the model its clients
train (``client_model``: the configured one, or Co-teaching's two networks of it) and,
where it needs them, hooks: client-side preparation once before training (NNC
relabelling), the labels and per-example fields of a client's dataset (NA-FedAvg's
``aggregation_weight``), the clients a round samples from (FedCorr's clean clients), work
before a round (NA-FedAvg's noise estimation), the round itself (FedDS's split round),
the server's step on what the clients sent beside their updates (SCAFFOLD's control
variate) and its steps after the round (on the stored client states; a phase decided
from the round's metrics). The defaults
are FedAvg. The driver knows a method only through this interface and scores the
``diagnostics.Diagnostic`` records its hooks return; the aggregator, optimisers and
schedule come from the config through ``Setup``.
"""

import dataclasses
from typing import Any, Callable, Optional

import numpy as np

from tff_noisy.params import Params
from tff_noisy.federated import client_work
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy


@dataclasses.dataclass(frozen=True)
class Setup:
  """What the config fixes for every method: model, data spec, optimisers, aggregator,
  and where the clients train (chosen when the run is assembled, ``simulation.assembly``)."""
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

  def build_process(self, parts: list,
                    controller: Optional[dict] = None) -> process_lib.FederatedProcess:
    return process_lib.build_process(
        self.model_fn, self.element_spec, self.client_optimizer, self.server_optimizer,
        program=ClientProgram(parts), model_aggregator=self.aggregator,
        local_epochs=self.local_epochs, weight_decay=self.weight_decay, faults=self.faults,
        client_runtime=self.clients, controller=controller)


class Method:
  """A method's learning process and driver hooks (the defaults are plain FedAvg)."""

  # Per-example dataset fields beyond x, y and index: {name: (numpy dtype, shape)}.
  extra_fields: dict = {}
  # Server-only state the method's hooks read and write between rounds, {name: initial
  # numpy value}: held in the server state's ``controller`` slot (checkpointed, never
  # broadcast; ``process.get_controller``/``set_controller``).
  controller: dict = {}

  def __init__(self, process: process_lib.FederatedProcess, params: Params,
               setup: Setup):
    self.process = process
    self.params = params
    self.setup = setup

  @classmethod
  def dataset_fields(cls, params: Params, data) -> dict:
    """``extra_fields``, or fields whose shapes depend on the params and the data.

    Called before the method is built (the fields fix the element spec), e.g. LSC's
    embedding width, which is its encoder's.
    """
    del params, data
    return dict(cls.extra_fields)

  @classmethod
  def client_model(cls, params: Params, model_fn: Callable) -> Callable:
    """The builder of the model the clients train and the server aggregates and
    evaluates, from the configured one's (Co-teaching: both its networks in one model,
    so that each is federated); default ``model_fn`` itself."""
    del params
    return model_fn

  @classmethod
  def client_parts(cls, params: Params, setup: Setup) -> list:
    """The clients' parts, in order; cross-entropy by default."""
    del params, setup
    return [CrossEntropy()]

  @classmethod
  def build(cls, params: Params, setup: Setup) -> 'Method':
    return cls(setup.build_process(cls.client_parts(params, setup), cls.controller), params,
               setup)

  def prepare(self, data, store) -> dict:
    """Runs once before training (and again on resume); returns ``results.extra``."""
    del data, store
    return {}

  def labels(self, client_id: str, data, store) -> np.ndarray:
    """The labels a client trains on: corrected ones if the method stored them."""
    return store.get(client_id, 'labels', data.y[client_id])

  def kept_examples(self, client_id: str, store) -> Optional[np.ndarray]:
    """Positions of the client's examples it trains on (Confident Learning drops its
    label issues); None: every example."""
    del client_id, store
    return None

  def client_extras(self, client_id: str, num_examples: int, store) -> dict:
    """Per-example fields of a client's dataset, matching ``dataset_fields``."""
    del client_id, num_examples, store
    return {}

  def all_clients_in_round(self, round_num: int) -> bool:
    del round_num
    return False

  def eligible_clients(self, round_num: int, client_ids: list, store) -> list:
    """The clients the round samples from (FedCorr's fine-tuning: its clean ones); the
    driver samples ``min(fl.clients_per_round, len(eligible))`` of them. Default: all."""
    del round_num, store
    return client_ids

  def before_round(self, round_num: int, state, datasets_fn, store):
    """Work before the round: ``(state, diagnostics)``; ``datasets_fn()`` builds the data.

    The returned state may carry new hparams (``process.set_hparams``): a phase the
    server decides here is checkpointed with the state.
    """
    del round_num, datasets_fn, store
    return state, {}

  def after_training(self, round_num: int, state, store):
    """The server's step once the round's client states are in ``store``: ``(state,
    diagnostics)``. It may change the store's learned values, which the next round's
    sample (``eligible_clients``) and data (``labels``) read: FedCorr's noise levels and
    corrected labels after a pre-processing iteration."""
    del round_num, store
    return state, {}

  def after_round(self, round_num: int, state, metrics: dict):
    """The server's step after a round's metrics: ``(state, diagnostics)``.

    A monitor (FedEFC's prestopping) decides a later phase here and keeps the decision
    in the state's hparams (the clients read it) and its own counters in the state's
    controller (only the server reads them); a checkpoint keeps both.
    """
    del round_num, metrics
    return state, {}

  def diagnose(self, round_num: int, state, store) -> dict:
    """Diagnostics once the round's client states are in ``store`` (read, never change).

    For per-client estimates the driver compares with the simulation truth (which the
    method never sees): ``noisy_clients`` ({client id: flagged}) and ``label_estimates``
    ({client id: estimated labels [n]}), as MaskedOptim reports them every round.
    """
    del round_num, state, store
    return {}

  def run_round(self, state, datasets: dict, client_states: list, faults=None) -> tuple:
    """One round on {client id: ClientData or dataset}; ``(state, metrics, client states,
    diagnostics)``.

    ``faults``: each client's simulated fault, in the same order, when the config has
    faults (the driver passes it only then); hand it on to ``process.next`` or
    ``process.train_clients``.
    """
    return self.round_result(self.process.next(state, list(datasets.values()),
                                               client_states, faults))

  def round_result(self, output: process_lib.RoundOutput) -> tuple:
    """``run_round``'s tuple of a round's ``process.next`` output, after the server's
    ``server_update`` on the clients' summed outputs."""
    train = output.metrics['client_work']['train']
    state = self.server_update(output.state, train.get(client_work.OUTPUTS_KEY, {}))
    return (state, round_metrics(output.metrics), output.client_states,
            dict(output.diagnostics))

  def server_update(self, state, outputs: dict):
    """The server's step on the sums over the round's clients of what their parts
    send beside the update (``ClientContext.send``; SCAFFOLD's control
    variate); the new state (its hparams are broadcast next round). Default: ``state``."""
    del outputs
    return state


def round_metrics(metrics) -> dict:
  """The driver's per-round metrics from a process's measurements.

  ``train_loss``/``train_accuracy`` are None when no client's update was finite (the
  round trained nothing that reached the model); so are the objective's own client-mean
  metrics (``objective``, present when the objective declares ``metric_names``).
  """
  train = metrics['client_work']['train']
  trained = int(train['num_examples']) > 0
  record = {
      'train_loss': float(train['loss']) if trained else None,
      'train_accuracy': float(train['accuracy']) if trained else None,
      'train_client_mean_accuracy': float(train['client_mean_accuracy']) if trained else None,
      'non_finite_clients': int(train['non_finite_clients']),
      'update_rejected': int(metrics['finalizer']['update_non_finite']),
      'aggregator': _plain(metrics['aggregator']),
  }
  if 'objective' in train:
    record['objective'] = {name: float(value) if trained else None
                           for name, value in train['objective'].items()}
  return record


def _plain(value):
  """Measurements as JSON-ready Python values."""
  if isinstance(value, dict):
    return {str(k): _plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  array = np.asarray(value)
  return array.item() if array.ndim == 0 else array.tolist()
