"""The experiment driver: rounds, client sampling, evaluation, checkpoints, results.

``Simulation(config)`` builds (or loads) the federated data, the model and the method's
learning process once; each ``run_round`` samples clients uniformly without replacement,
runs the method's round on their datasets and evaluates the global model on the test
split. ``run_experiment(config, out_dir)`` steps it to the last round and writes the
run directory (checkpoints, TensorBoard, results). All randomness of round r derives from
(seed, r), so a resumed run continues with exactly the samples and data order of an
uninterrupted one.

Simulated faults (``faults:``, ``ops.faults``): the round's dropouts are removed from its
sample before their data is built (none in a round the method needs every client in),
and each reporting client's fault goes into the computation, where a Byzantine client's
update is corrupted. Which clients are faulty is recorded for reporting only.
"""

import dataclasses
import os
import sys
import time
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np
from sklearn import metrics as sk_metrics
import tensorflow as tf
import tqdm

from tff_noisy import config as config_lib
from tff_noisy import device as device_lib
from tff_noisy import diagnostics as diagnostics_lib
from tff_noisy import remote
from tff_noisy import validation
from tff_noisy.config import ConfigError, ExperimentConfig
from tff_noisy.data import federated as federated_data
from tff_noisy.data import custom as custom_data
from tff_noisy.data import noise as noise_lib
from tff_noisy.data import sources
from tff_noisy.errors import UserError, warn
from tff_noisy.params import did_you_mean
from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated.client_work import AGGREGATION_WEIGHT_KEY
from tff_noisy.methods import recipe as recipe_lib
from tff_noisy.ops import faults as faults_lib
from tff_noisy.simulation import checkpoint
from tff_noisy.simulation import assembly
from tff_noisy.simulation import progress as progress_lib
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import rounds
from tff_noisy.simulation.client_state import ClientStateStore
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_EVAL_BATCH = 1024
_INFERENCE_ATTRIBUTE = '_tff_noisy_inference'  # logits_of's traced calls, on the model.
DIVERGENCE_FACTOR = 100  # A training loss this many times ln C is diverging.


class NonFiniteModelError(UserError):
  """The global model became non-finite: the run stops (``Simulation.run_round``)."""


def sample_clients(client_ids, num: int, seed: int, round_num: int) -> list:
  """Uniform sample of ``num`` clients without replacement, fixed by (seed, round)."""
  rng = np.random.default_rng([seed, round_num])
  picked = np.sort(rng.choice(len(client_ids), size=num, replace=False))
  return [client_ids[i] for i in picked]


def client_dataset(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle_seed: int,
                   extra: Optional[dict] = None) -> tf.data.Dataset:
  """A client's batched ``tf.data`` dataset of ``{'x', 'y', 'index', **extra}``.

  ``index`` is each example's position in the client's data: the row of per-example
  client state (e.g. learned label logits) that belongs to it.
  """
  return client_data_lib.make_client_data(x, y, batch_size, shuffle_seed, extra).dataset()


def client_datasets(plan, data, store, client_ids, shuffle_seeds, batch_size: int):
  """``({id: ClientData}, {id: update weight})`` of the non-empty clients among
  ``client_ids``: the examples the recipe's data plan (``recipe.DataPlan``) keeps, with its
  labels and per-example extras (``ClientData.dataset()`` is the client's ``tf.data``
  dataset)."""
  clients, weights = {}, {}
  for cid, shuffle_seed in zip(client_ids, shuffle_seeds):
    x, y = data.x[cid], plan.labels(cid, data, store)
    kept = plan.kept and plan.kept(cid, store)
    if kept is not None:
      x, y = x[kept], y[kept]
    if len(y):
      extras = plan.extras(cid, len(y), store) if plan.extras else {}
      example_weights = extras.get(AGGREGATION_WEIGHT_KEY)
      weights[cid] = float(len(y) if example_weights is None else np.sum(example_weights))
      clients[cid] = client_data_lib.make_client_data(x, y, batch_size, int(shuffle_seed),
                                                      extras)
  return clients, weights


def logits_of(model: tf.keras.Model, x: np.ndarray) -> np.ndarray:
  """``model``'s inference-mode logits on ``x``, in batches of ``_EVAL_BATCH``, through one
  ``tf.function`` per model and input shape, kept on the model (``model.predict`` builds
  a data pipeline and traces again on every call: 0.13 s a round on the demo)."""
  key = (x.shape[1:], x.dtype.str)
  traced = model.__dict__.get(_INFERENCE_ATTRIBUTE)
  if traced is None:
    traced = {}
    object.__setattr__(model, _INFERENCE_ATTRIBUTE, traced)  # Not a tracked attribute.
  if key not in traced:
    traced[key] = tf.function(lambda batch: model(batch, training=False),
                              input_signature=[tf.TensorSpec((None, *x.shape[1:]), x.dtype)])
  return np.concatenate([traced[key](x[i:i + _EVAL_BATCH]).numpy()  # [0, C] for no x.
                         for i in range(0, max(len(x), 1), _EVAL_BATCH)])


def evaluate(model: tf.keras.Model, x: np.ndarray, y: np.ndarray) -> dict:
  """``scores`` of ``model`` (logits out) on ``(x, y)``."""
  return scores(logits_of(model, x), y)


def scores(logits: np.ndarray, y: np.ndarray) -> dict:
  """Accuracy, macro-F1 and each class's accuracy (recall; None for a class the test
  split lacks) of ``logits`` [N, C] against labels ``y``."""
  predicted = np.argmax(logits, axis=-1)
  num_classes = logits.shape[-1]
  totals = np.bincount(y, minlength=num_classes)
  hits = np.bincount(y[predicted == y], minlength=num_classes)
  return {
      'test_accuracy': float(np.mean(predicted == y)),
      'test_macro_f1': float(sk_metrics.f1_score(y, predicted, average='macro')),
      'test_class_accuracy': [float(h / t) if t else None for h, t in zip(hits, totals)],
  }


def run_experiment(config: ExperimentConfig, out_dir: Optional[str], *,
                   resume: bool = False, progress: Optional[bool] = None,
                   workers: Optional[Sequence[str]] = None,
                   choices: Optional[validation.Choices] = None,
                   data: Optional[federated_data.FederatedData] = None,
                   model_fn: Optional[Callable] = None) -> results_lib.Results:
  """Runs one federated experiment and writes its results to ``out_dir`` (None: writes
  nothing; the returned results hold the final weights).

  ``progress``: a tqdm bar on stderr (True), nothing (False) or by default the bar on a
  terminal and otherwise a line every ~10% of the rounds (``progress.is_logged``).
  ``workers``: ``host:port`` of TFF workers to run the computations on (``remote``),
  with the same results as locally; such a run checkpoints after every round, so a
  worker that stops answering (``workers.WorkerLost``) loses no completed round.
  ``choices``: the config's validated choices, where a caller checked it already.
  ``data``, ``model_fn``: the user's own federated data and model builder (``Simulation``).
  """
  config = config_lib.resolve_client_runtime(config, on_workers=bool(workers))
  what = f'method.name {config.method.name} with fl.aggregator {config.fl.aggregator}'
  with remote.on_workers(workers, what) as runtime:
    return _run_experiment(Simulation(config, runtime, choices, data=data, model_fn=model_fn),
                           out_dir, resume, progress)


class RunState(NamedTuple):
  """What a run carries from round to round (``Simulation.step``)."""
  server: object  # The federated process's server state.
  store: ClientStateStore  # The clients' state between rounds.
  history: tuple  # One record per round, from round 1.


class Simulation:
  """One run assembled from its config once, then stepped a round at a time.

  Building it validates the config, selects the device, builds (or reads) the federated
  data, the method with its process, the evaluation model and the initial server state.
  Then: optionally ``resume_from`` a checkpoint directory, ``prepare`` (the method's
  one-off work; again on resume), and ``run_round`` until ``done``; ``save_checkpoint``
  whenever wanted and ``results`` at the end. ``run_experiment`` is a loop over it that
  adds the run directory's files; tests and benchmarks can step it directly.

  ``runtime``: what ``remote.on_workers`` yields (``{'workers': [...]}`` or ``{}``);
  ``choices``: the config's ``validation.Choices`` if it was validated already (it is
  validated once per run). ``data``: the user's federated data (``data.dataset: custom``,
  ``data.custom``), with the config's noise applied to it; ``model_fn``: the user's model
  builder (``model.name: custom``).
  """

  def __init__(self, config: ExperimentConfig, runtime: Optional[dict] = None,
               choices: Optional[validation.Choices] = None, *,
               data: Optional[federated_data.FederatedData] = None,
               model_fn: Optional[Callable] = None):
    runtime = runtime or {}
    # The runtime chosen here is the one results.json, the checkpoints and the client
    # runtime (``assembly.build_method``) use.
    config = config_lib.resolve_client_runtime(config, bool(runtime.get('workers')))
    self.config = config
    self.choices = choices or validation.validate_experiment(config, data, model_fn)
    self.device = device_lib.select(config.device)  # Before any TensorFlow op runs.
    # The model fits the data: checked before any data work.
    spec = sources.DATASETS[config.data.dataset] if data is None else data
    assembly.make_model_fn(config, spec.input_shape, spec.num_classes, model_fn)
    if data is None:
      self.data = federated_data.build_federated_data(config, checked=True)
    else:
      self.data = custom_data.with_noise(data, config.noise, config.seed)
    self.truth = diagnostics_lib.Truth.of(self.data)  # What methods' diagnostics score on.
    self.client_ids = list(self.data.client_ids)
    self.clients_per_round = config.clients_per_round()
    if self.clients_per_round > len(self.client_ids):
      raise ConfigError(f'fl.clients_per_round: {self.clients_per_round} > '
                        f'{len(self.client_ids)} clients')
    self.method = assembly.build_method(config, self.data, self.choices, model_fn)
    self.recipe, self.process = self.method.recipe, self.method.process
    self.runtime = dict(runtime, **assembly.describe_runtime(self.process,
                                                             bool(runtime.get('workers'))))
    tf.keras.utils.set_random_seed(config.seed)
    self.eval_model = self.method.setup.model_fn()
    start = self.initial()
    self.state, self.store = start.server, start.store
    self.history = []  # One record per round, from round 1 (a resumed run's included).
    self.first_round = 1  # The first round this object runs.
    self.earlier_parts = []  # Where the rounds before ``first_round`` ran (resumed runs).
    self.identity = checkpoint.identity_of(
        config, [w.shape for w in self.eval_model.get_weights()], self.data.config_hash,
        type(self.choices.method_params).identifying(
            dataclasses.asdict(self.choices.method_params)))
    self.byzantine = faults_lib.byzantine_clients(self.client_ids, config.faults.byzantine,
                                                  config.seed)
    self.extra = None  # The server steps' ``prepare`` diagnostics (results.json ``extra``).
    self._diverging = False  # Said once (``_note_divergence``).
    self._warned_no_reporters = False

  @property
  def next_round(self) -> int:
    return len(self.history) + 1

  @property
  def done(self) -> bool:
    return self.next_round > self.config.fl.rounds

  def resume_from(self, checkpoint_dir: str) -> bool:
    """Continues from the newest usable checkpoint in ``checkpoint_dir`` (False: none).

    Raises ``checkpoint.CheckpointError`` for a checkpoint of another run.
    """
    if self.history or self.extra is not None:
      raise RuntimeError('resume_from comes before prepare and the first round')
    loaded = checkpoint.load(checkpoint_dir, self.state, self.identity,
                             self.config.fl.rounds)
    if loaded is None:
      return False
    done, self.state, self.store, self.history, self.earlier_parts = loaded
    self.first_round = done + 1
    return True

  def _server(self, store, **round_values) -> recipe_lib.ServerContext:
    return recipe_lib.ServerContext(self.process, self.method.setup, self.data, store,
                                    **round_values)

  def initial(self) -> RunState:
    """The state before round 1: the initial server state, no client state, no rounds."""
    return RunState(assembly.initial_state(self.process, self.eval_model),
                    ClientStateStore(), ())

  def prepare(self, store: Optional[ClientStateStore] = None) -> dict:
    """The server steps' one-off work before the next round, on ``store`` (default this
    simulation's; deterministic: a resumed run redoes it identically) and the truth scores
    of what they decided; ``extra``."""
    extra = {}
    for step in self.recipe.server:
      extra.update(step.prepare(self._server(self.store if store is None else store)))
    self.extra = diagnostics_lib.score(extra, self.truth)
    return self.extra

  def run_round(self, client_ids: Optional[Sequence[str]] = None) -> dict:
    """Runs round ``next_round`` (``step`` on this simulation's state, which it then
    holds) and returns its record, also appended to ``history``."""
    state, record = self.step(RunState(self.state, self.store, tuple(self.history)),
                              client_ids)
    self.state, self.store, self.history = state.server, state.store, list(state.history)
    return record

  def step(self, state: 'RunState', client_ids: Optional[Sequence[str]] = None) -> tuple:
    """Round ``len(state.history) + 1`` from ``state``: ``(state after it, its record)``.

    The record: the sample, the recipe's server steps around its clients' training, the
    truth scores of their diagnostics and, when due, the global model's evaluation.
    ``state.store`` is updated in place (pass a copy to keep it). ``client_ids``: the
    clients that train this round, instead of the config's sample (every client still
    trains in a round the recipe needs them all in).
    """
    if self.extra is None:
      raise RuntimeError('call prepare before the first round')
    round_num = len(state.history) + 1
    server, store = state.server, state.store
    sampled, seeds, dropped = self._sample(round_num, store, client_ids)
    weights = {}  # The update weight each client's work will use.

    def build_clients():
      """The round's non-empty clients' data; records each one's update weight."""
      built, built_weights = client_datasets(self.recipe.data, self.data, store, sampled,
                                             seeds, self.config.fl.batch_size)
      weights.update(built_weights)
      return built

    def build_datasets():
      return {cid: client.dataset() for cid, client in build_clients().items()}

    record = {'round': round_num}
    started = time.time()
    for step in self.recipe.server:
      server, diagnostics = step.before(round_num, server,
                                        self._server(store, datasets=build_datasets))
      record.update(diagnostics_lib.score(diagnostics, self.truth))
    with rounds.collector_paused():  # Building the clients allocates as much as training.
      datasets = build_clients()
      record.update(clients=list(datasets),
                    skipped_empty_clients=len(sampled) - len(datasets),
                    client_weights=[weights[cid] for cid in datasets])
      if self.config.faults.active():
        record.update(dropped_clients=dropped,
                      byzantine_clients=[cid for cid in datasets if cid in self.byzantine])
      if datasets:
        server = self._train(round_num, server, store, datasets, record)
      else:
        self._no_reporters(round_num, record, len(dropped), len(sampled) - len(datasets))
    record['seconds'] = time.time() - started
    record['wall_time'] = time.time()
    fl, data = self.config.fl, self.data
    if (round_num % fl.eval_every == 0 or round_num == fl.rounds) and len(data.y_test):
      self.process.get_model_weights(server).assign_weights_to(self.eval_model)
      record.update(evaluate(self.eval_model, data.x_test, data.y_test))
    return RunState(server, store, state.history + (record,)), record

  def _sample(self, round_num: int, store, client_ids) -> tuple:
    """``(sampled clients, their shuffle seeds, dropped clients)`` of round ``round_num``."""
    config, schedule, ids = self.config, self.recipe.schedule, self.client_ids
    everyone = schedule.everyone(round_num)
    if everyone:
      sampled = ids
    elif client_ids is not None:
      sampled = self._known_clients(client_ids)
    else:  # The config's uniform sample among the clients the recipe lets train.
      eligible = schedule.eligible(round_num, ids, store) if schedule.eligible else ids
      sampled = sample_clients(eligible, min(self.clients_per_round, len(eligible)),
                               config.seed, round_num)
    seeds = np.random.default_rng([config.seed, round_num, 1]).integers(2**31, size=len(sampled))
    dropped = [] if everyone else faults_lib.dropped_clients(sampled, config.faults.dropout,
                                                             config.seed, round_num)
    if dropped:
      seeds = [s for cid, s in zip(sampled, seeds) if cid not in dropped]
      sampled = [cid for cid in sampled if cid not in dropped]
    return sampled, seeds, dropped

  def _train(self, round_num: int, server, store, datasets: dict, record: dict):
    """Trains the round's clients, stores their states, runs the server steps after the
    round and checks the model; adds to ``record``; the new server state."""
    faults = None
    if self.config.faults.active():
      faults = [self._client_fault(cid, round_num) for cid in datasets]
    client_states = [store.objective_state(cid, self.process.program, self.data.y[cid])
                     for cid in datasets]
    trained = rounds.train(self.recipe, self.process, round_num, server, datasets,
                           client_states, faults, self._server(store))
    for cid, client_state in zip(datasets, trained.client_states):
      store.set_objective_state(cid, client_state)
    record.update(trained.metrics)
    record.update(diagnostics_lib.score(trained.diagnostics, self.truth))
    server = trained.state
    after = self._server(store, metrics=trained.metrics, outputs=trained.outputs)
    for step in self.recipe.server:
      server, diagnostics = step.after(round_num, server, after)
      record.update(diagnostics_lib.score(diagnostics, self.truth))
    self._check_model_finite(round_num, server)
    self._note_divergence(record)
    if trained.metrics['train_loss'] is None:
      warn(f'round {round_num}: every client update was non-finite and rejected; the '
           'model did not change (train_loss and train_accuracy are null)')
    return server

  def _no_reporters(self, round_num: int, record: dict, dropped: int, empty: int) -> None:
    record['no_reporters'] = True
    if not self._warned_no_reporters:
      self._warned_no_reporters = True
      warn(f'round {round_num}: no client reported ({dropped} dropped out, {empty} had no '
           'data), so the model did not change; later rounds like this are only recorded '
           '(no_reporters: true in results.json)')

  def _check_model_finite(self, round_num: int, server) -> None:
    """Stops the run when the global model became non-finite (nothing of the round is
    recorded or checkpointed): the aggregate was finite, so the server step made it so."""
    weights = tf.nest.flatten(self.process.get_model_weights(server))
    if all(np.isfinite(np.asarray(w)).all() for w in weights):
      return
    fl = self.config.fl
    raise NonFiniteModelError(
        f'round {round_num}: the global model became non-finite (NaN or inf) after the '
        f'server step; the likely cause is fl.server_lr={fl.server_lr} or '
        f'fl.client_lr={fl.client_lr} too large; the rounds before it are in the '
        'checkpoints')

  def _note_divergence(self, record: dict) -> None:
    """Marks the first round whose training loss is over ``DIVERGENCE_FACTOR`` x ln C, the
    cross-entropy of a uniform guess (``diverging`` in its record), and warns once: a
    learning rate too large trains to chance."""
    loss = record.get('train_loss')
    if loss is None or self._diverging:
      return
    uniform = float(np.log(self.data.num_classes))
    if not np.isfinite(loss) or loss > DIVERGENCE_FACTOR * uniform:
      self._diverging = record['diverging'] = True
      fl = self.config.fl
      warn(f"round {record['round']}: the training loss {loss:.3g} is over "
           f'{DIVERGENCE_FACTOR}x that of a uniform guess ({uniform:.3g}): training is '
           f'diverging; try a smaller fl.client_lr (now {fl.client_lr}) or fl.server_lr '
           f'(now {fl.server_lr})')

  def _known_clients(self, client_ids) -> list:
    """``client_ids`` (a list, tuple or 1-D array) checked against the data's clients (a
    ValueError naming the first unknown or repeated one), in the data's client order."""
    if isinstance(client_ids, np.ndarray) and client_ids.ndim == 1:
      client_ids = client_ids.tolist()
    if isinstance(client_ids, str) or not isinstance(client_ids, Sequence):
      raise TypeError(f'client_ids: expected a list of client ids, got '
                      f'{type(client_ids).__name__}')
    known = set(self.client_ids)
    for cid in client_ids:
      if cid not in known:
        raise ValueError(f'client_ids: unknown client {cid!r}{did_you_mean(cid, known)} '
                         f'(the data has {len(known)}: {self.client_ids[0]}, ...)')
    if len(set(client_ids)) != len(client_ids) or not client_ids:
      raise ValueError('client_ids: expected distinct client ids, at least one')
    chosen = set(client_ids)
    return [cid for cid in self.client_ids if cid in chosen]

  def _client_fault(self, cid: str, round_num: int) -> dict:
    faults = self.config.faults
    behaviour = faults.behaviour if cid in self.byzantine else None
    return faults_lib.fault_spec(behaviour, faults.factor, faults.std, faults_lib.noise_seed(
        self.config.seed, round_num, self.client_ids.index(cid)))

  def runtime_parts(self) -> list:
    """Where each part of the run so far trained (results.json ``runtime_parts``): the
    earlier parts, then rounds ``first_round``..now on ``runtime``, if any ran here."""
    if self.first_round > len(self.history):  # Resumed after its last round.
      return list(self.earlier_parts)
    return self.earlier_parts + [dict(rounds=[self.first_round, len(self.history)],
                                      **self.runtime)]

  def save_checkpoint(self, checkpoint_dir: str) -> None:
    """Checkpoints the rounds run so far (``checkpoint.save``)."""
    checkpoint.save(checkpoint_dir, len(self.history), self.state, self.store,
                    self.history, self.identity, self.runtime_parts())

  def model_weights(self, server) -> list:
    """The global model's weights in server state ``server``, in Keras order (also into
    the evaluation model)."""
    self.process.get_model_weights(server).assign_weights_to(self.eval_model)
    return self.eval_model.get_weights()

  def final_weights(self) -> list:
    """The global model's weights, in Keras order (``final_weights.npz``)."""
    return self.model_weights(self.state)

  def results(self) -> results_lib.Results:
    """What results.json keeps of the run so far."""
    config, data = self.config, self.data
    return results_lib.Results(
        config=config.to_dict(), data_hash=data.config_hash, method=config.method.name,
        params=dataclasses.asdict(self.choices.method_params), rounds=self.history,
        client_noise_rates={cid: float(r) for cid, r in zip(
            self.client_ids, data.noise_rates if data.noise_rates is not None else ())},
        client_sizes={cid: len(data.y[cid]) for cid in self.client_ids},
        client_flip_kinds=dict(zip(self.client_ids, noise_lib.client_flip_kinds(
            len(self.client_ids), config.noise) or ())),
        extra=self.extra, device=self.device, runtime=self.runtime,
        byzantine_clients=self.byzantine, runtime_parts=self.runtime_parts())


def _run_experiment(simulation: Simulation, out_dir: Optional[str], resume: bool,
                    progress: Optional[bool]) -> results_lib.Results:
  """``run_experiment``'s loop over ``simulation``, writing the run directory (if any)."""
  config = simulation.config
  fl = config.fl
  ckpt_dir = out_dir and os.path.join(out_dir, 'checkpoints')
  if resume and ckpt_dir:
    simulation.resume_from(ckpt_dir)
  simulation.prepare()
  if out_dir:
    os.makedirs(out_dir, exist_ok=True)
    writer = tf.summary.create_file_writer(os.path.join(out_dir, 'tb'))
  else:
    writer = tf.summary.create_noop_writer()
  show = sys.stderr.isatty() if progress is None else progress
  start = simulation.next_round
  bar = tqdm.tqdm(total=fl.rounds, initial=start - 1, disable=not show,
                  desc=f'{config.method.name}', unit='round', file=sys.stderr)
  log_lines = progress is None and not show
  round_seconds = []  # This process's rounds, for the progress lines.
  while not simulation.done:
    began = time.monotonic()
    record = simulation.run_round()
    round_num = record['round']
    with writer.as_default(step=round_num):
      for key in ('train_loss', 'train_accuracy', 'test_accuracy', 'test_macro_f1'):
        if record.get(key) is not None:
          tf.summary.scalar(key, record[key])
    if ckpt_dir and (round_num % fl.checkpoint_every == 0 or round_num == fl.rounds
                     or simulation.runtime.get('workers')):
      simulation.save_checkpoint(ckpt_dir)
    bar.set_postfix(acc=record.get('test_accuracy', float('nan')),
                    s_per_round=round(record['seconds'], 2))
    bar.update(1)
    round_seconds.append(time.monotonic() - began)
    if log_lines and progress_lib.is_logged(round_num, start, fl.rounds):
      print(progress_lib.line(f'{config.method.name} seed {config.seed}', round_num,
                              fl.rounds, round_seconds, record.get('test_accuracy')),
            file=sys.stderr, flush=True)
  bar.close()
  writer.close()
  results = simulation.results()
  results.final_weights = simulation.final_weights()
  if out_dir:
    results_lib.save_final_weights(out_dir, results.final_weights)
    results_lib.write(out_dir, results)
  return results
