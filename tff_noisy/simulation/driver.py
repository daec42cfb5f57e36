"""The experiment driver: rounds, client sampling, evaluation, checkpoints, results.

``run_experiment(config, out_dir)`` builds (or loads) the federated data, the model and
the method's learning process, then for each round samples clients uniformly without
replacement, runs ``process.next`` on their datasets and evaluates the global model on
the test split. All randomness of round r derives from (seed, r), so a resumed run
continues with exactly the samples and data order of an uninterrupted one.

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
import zipfile

import numpy as np
from sklearn import metrics as sk_metrics
import tensorflow as tf
import tqdm

import models
from tff_noisy import config as config_lib
from tff_noisy import device as device_lib
from tff_noisy import remote
from tff_noisy import runtime as client_runtime
from tff_noisy import validation
from tff_noisy.config import ConfigError, ExperimentConfig
from tff_noisy.data import federated as federated_data
from tff_noisy.data import noise as noise_lib
from tff_noisy.data import sources
from tff_noisy.errors import UserError, warn
from tff_noisy.federated import aggregators
from tff_noisy.federated import algorithms
from tff_noisy.federated import client_data as client_data_lib
from tff_noisy.federated import client_work
from tff_noisy.federated.client_work import AGGREGATION_WEIGHT_KEY
from tff_noisy.ops import confident_learning
from tff_noisy.ops import detection
from tff_noisy.ops import faults as faults_lib
from tff_noisy.ops import knn
from tff_noisy.ops import label_distribution
from tff_noisy.ops import transition
from tff_noisy.simulation import checkpoint
from tff_noisy.simulation import progress as progress_lib
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation.client_state import ClientStateStore
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_EVAL_BATCH = 1024


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


def client_datasets(method, data, store, client_ids, shuffle_seeds, batch_size: int):
  """``({id: ClientData}, {id: update weight})`` of the non-empty clients among
  ``client_ids``: the examples the method keeps, with its labels and per-example extras
  (``ClientData.dataset()`` is the client's ``tf.data`` dataset)."""
  clients, weights = {}, {}
  for cid, shuffle_seed in zip(client_ids, shuffle_seeds):
    x, y = data.x[cid], method.labels(cid, data, store)
    kept = method.kept_examples(cid, store)
    if kept is not None:
      x, y = x[kept], y[kept]
    if len(y):
      extras = method.client_extras(cid, len(y), store)
      weights[cid] = float(np.sum(extras.get(AGGREGATION_WEIGHT_KEY, np.ones(len(y)))))
      clients[cid] = client_data_lib.make_client_data(x, y, batch_size, int(shuffle_seed),
                                                      extras)
  return clients, weights


def evaluate(model: tf.keras.Model, x: np.ndarray, y: np.ndarray) -> dict:
  """Test accuracy, macro-F1 and each class's accuracy (recall; None for a class the test
  split lacks) of ``model`` (logits out)."""
  logits = model.predict(x, batch_size=_EVAL_BATCH, verbose=0)
  predicted = np.argmax(logits, axis=-1)
  num_classes = logits.shape[-1]
  totals = np.bincount(y, minlength=num_classes)
  hits = np.bincount(y[predicted == y], minlength=num_classes)
  return {
      'test_accuracy': float(np.mean(predicted == y)),
      'test_macro_f1': float(sk_metrics.f1_score(y, predicted, average='macro')),
      'test_class_accuracy': [float(h / t) if t else None for h, t in zip(hits, totals)],
  }


def make_model_fn(config: ExperimentConfig, input_shape, num_classes) -> Callable:
  """Checks the model fits the data (a ConfigError if not) and returns its builder."""
  options = config.model.options()
  try:
    models.check_model_fits(config.model.name, tuple(input_shape), num_classes, **options)
  except ValueError as e:
    raise ConfigError(f'model.name: {e}') from None
  return lambda: models.build_model(config.model.name, tuple(input_shape), num_classes,
                                    **options)


def _optimizers(config: ExperimentConfig):
  fl = config.fl
  if fl.client_optimizer == 'adam':
    client = tff.learning.optimizers.build_adam(fl.client_lr)
  else:
    client = tff.learning.optimizers.build_sgdm(fl.client_lr, fl.momentum or None)
  return client, tff.learning.optimizers.build_sgdm(fl.server_lr)


def _keras_weights(model: tf.keras.Model):
  """The model's current weights as ``ModelWeights`` of NumPy arrays."""
  return tf.nest.map_structure(lambda v: v.numpy(), client_work.model_weights_of(model))


def _label_correction_report(data, store) -> dict:
  """Evaluates labels a method corrected against the simulation's true labels."""
  corrected = [cid for cid in data.client_ids if store.get(cid, 'labels') is not None]
  if not corrected:
    return {}
  per_client = {cid: knn.correction_report(data.y[cid], store.get(cid, 'labels'),
                                           data.y_true[cid]) for cid in corrected}
  overall = knn.correction_report(
      np.concatenate([data.y[c] for c in corrected]),
      np.concatenate([store.get(c, 'labels') for c in corrected]),
      np.concatenate([data.y_true[c] for c in corrected]))
  return {'label_correction': {'overall': overall, 'per_client': per_client}}


def _label_issue_report(data, store) -> dict:
  """The label issues a method flagged (Confident Learning) against the simulation truth:
  precision (flagged labels that are wrong) and recall (wrong labels flagged)."""
  flagged = [cid for cid in data.client_ids
             if store.get(cid, confident_learning.LABEL_ISSUES) is not None]
  if not flagged:
    return {}

  def scores(cids):
    issues = np.concatenate([store.get(c, confident_learning.LABEL_ISSUES) for c in cids])
    wrong = np.concatenate([data.y[c] != data.y_true[c] for c in cids])
    hits = int(np.sum(issues & wrong))
    return {'flagged': int(issues.sum()), 'wrong_labels': int(wrong.sum()),
            'examples': len(wrong),
            'precision': hits / int(issues.sum()) if issues.any() else None,
            'recall': hits / int(wrong.sum()) if wrong.any() else None}

  return {'label_issues': {'overall': scores(flagged),
                           'per_client': {cid: scores([cid]) for cid in flagged}}}


# Per-client diagnostic -> (name of its Pearson correlation, the truth it is compared to).
_TRUTH_CORRELATIONS = {
    'noise_estimates': ('noise_estimate_correlation', lambda rate: rate),
    'reliabilities': ('reliability_correlation', lambda rate: 1.0 - rate),
}


def _with_truth(diagnostics: dict, data) -> dict:
  """Adds the correlation of per-client estimates with the true per-client noise rates,
  the errors of per-client transition matrices against the true ones, a detection's
  precision and recall against the truly noisy clients and the accuracy of estimated
  labels against the true labels."""
  true_rates = dict(zip(data.client_ids, data.noise_rates))
  for key, (name, truth) in _TRUTH_CORRELATIONS.items():
    estimates = diagnostics.get(key)
    if not estimates or len(estimates) < 2:
      continue
    est = np.array(list(estimates.values()))
    true = np.array([truth(true_rates[cid]) for cid in estimates])
    if est.std() > 0 and true.std() > 0:
      diagnostics[name] = float(np.corrcoef(est, true)[0, 1])
  matrices = diagnostics.pop('transition_estimates', None)  # {estimator: {cid: Q}}
  if matrices:  # Q[i, j] = p(noisy i | true j): the transpose of the true T.
    true_matrices = {cid: m.T for cid, m in zip(data.client_ids, data.transition_matrices)}
    diagnostics['transition_matrix_error'] = {
        name: transition.matrix_error_report(estimates, true_matrices)
        for name, estimates in matrices.items()}
  flags = diagnostics.pop('noisy_clients', None)  # {cid: flagged} (Method.report).
  if flags:
    diagnostics['noisy_clients'] = [cid for cid, flagged in flags.items() if flagged]
    diagnostics['detection_truth'] = detection.detection_report(
        list(flags.values()), [true_rates[cid] for cid in flags])
  estimates = diagnostics.pop('label_estimates', None)  # {cid: labels} (Method.report).
  if estimates:
    diagnostics['label_estimate_accuracy'] = label_distribution.estimate_accuracy_report(
        estimates, data.y, data.y_true)
  return diagnostics


def _element_spec(data, fields: dict, batch_size: int):
  """The client datasets' element spec, with a method's per-example fields and shapes."""
  first = data.client_ids[0]
  extras = {name: np.zeros((1, *shape), dtype) for name, (dtype, shape) in fields.items()}
  return client_dataset(data.x[first][:1], data.y[first][:1], batch_size, 0,
                        extras).element_spec


def _runtime_parts(earlier: list, runtime: dict, first: int, last: int) -> list:
  """``earlier`` parts of a run plus this process's: rounds ``first``..``last`` on
  ``runtime`` (results.json ``runtime_parts``)."""
  if first > last:  # Resumed after its last round: nothing ran here.
    return list(earlier)
  return list(earlier) + [dict(rounds=[first, last], **runtime)]


def build_method(config: ExperimentConfig, data,
                 choices: Optional[validation.Choices] = None) -> algorithms.Method:
  """The config's method, built on what the config fixes for every method (``Setup``)."""
  choices = choices or validation.validate_experiment(config)
  method_cls = algorithms.method_class(config.method.name)
  client_optimizer, server_optimizer = _optimizers(config)
  setup = algorithms.base.Setup(
      model_fn=make_model_fn(config, data.input_shape, data.num_classes),
      element_spec=_element_spec(
          data, method_cls.dataset_fields(choices.method_params, data), config.fl.batch_size),
      client_optimizer=client_optimizer, server_optimizer=server_optimizer,
      aggregator=aggregators.build_factory(config.fl.aggregator, choices.aggregator_params),
      local_epochs=config.fl.local_epochs, weight_decay=config.fl.weight_decay,
      seed=config.seed, rounds=config.fl.rounds, num_classes=data.num_classes,
      batch_size=config.fl.batch_size, faults=config.faults.active(),
      client_runtime=config.fl.client_runtime, clients_per_call=config.fl.clients_per_call)
  return method_cls.build(choices.method_params, setup)


class FinishedRun(NamedTuple):
  results: dict  # results.json
  config: ExperimentConfig
  data: federated_data.FederatedData
  model: tf.keras.Model  # With the run's final weights.


def load_finished_run(run_dir: str) -> FinishedRun:
  """A finished run's results, config, federated data (rebuilt or read from the cache)
  and final model.

  Raises:
    FileNotFoundError: ``run_dir`` has no results.json or final_weights.npz.
    UserError: results.json or final_weights.npz cannot be read, or the weights do not
      fit the run's model (the message names the file).
  """
  results = results_lib.load(run_dir)
  try:
    weights = results_lib.load_final_weights(run_dir)
  except (ValueError, EOFError, zipfile.BadZipFile) as e:
    raise UserError(f'{os.path.join(run_dir, results_lib.WEIGHTS_FILE)} cannot be read '
                    f'({e}); write it again with `tff-noisy run CONFIG --out {run_dir} '
                    '--resume`') from None
  config = config_lib.from_dict(results['config'])
  data = federated_data.build_federated_data(config)
  model = make_model_fn(config, data.input_shape, data.num_classes)()
  expected = [tuple(w.shape) for w in model.get_weights()]
  if [tuple(w.shape) for w in weights] != expected:
    raise UserError(f'{os.path.join(run_dir, results_lib.WEIGHTS_FILE)} holds '
                    f'{len(weights)} arrays that do not fit the run\'s model '
                    f'({config.model.name}: {len(expected)} weight arrays); it belongs to '
                    f'another run: write it again with `tff-noisy run CONFIG --out {run_dir} '
                    '--resume`')
  model.set_weights(weights)
  return FinishedRun(results, config, data, model)


def run_experiment(config: ExperimentConfig, out_dir: str, *, resume: bool = False,
                   progress: Optional[bool] = None,
                   workers: Optional[Sequence[str]] = None) -> results_lib.Results:
  """Runs one federated experiment and writes its results to ``out_dir``.

  ``progress``: a tqdm bar on stderr (True), nothing (False) or by default the bar on a
  terminal and otherwise a line every ~10% of the rounds (``progress.is_logged``).
  ``workers``: ``host:port`` of TFF workers to run the computations on (``remote``),
  with the same results as locally; such a run checkpoints after every round, so a
  worker that stops answering (``workers.WorkerLost``) loses no completed round.
  """
  if workers and config.fl.client_runtime != 'tff':
    where = {'tflite': "this machine's TFLite interpreter",
             'tf': "this process's TensorFlow"}[config.fl.client_runtime]
    raise ConfigError(f'--workers: with fl.client_runtime: {config.fl.client_runtime} the '
                      f'clients train in {where}, not on TFF workers; use fl.client_runtime: '
                      'tff with --workers, or no --workers')
  what = f'method.name {config.method.name} with fl.aggregator {config.fl.aggregator}'
  with remote.on_workers(workers, what) as runtime:
    return _run_experiment(config, out_dir, resume, progress, runtime)


def _run_experiment(config: ExperimentConfig, out_dir: str, resume: bool,
                    progress: Optional[bool], runtime: dict) -> results_lib.Results:
  """``run_experiment`` in the TFF runtime ``runtime`` describes (results.json keeps it)."""
  choices = validation.validate_experiment(config)
  device = device_lib.select(config.device)  # Before any TensorFlow op runs.
  spec = sources.DATASETS[config.data.dataset]
  make_model_fn(config, spec.input_shape, spec.num_classes)  # Fits, before any data work.
  data = federated_data.build_federated_data(config)

  fl = config.fl
  ids = list(data.client_ids)
  num_sampled = config.clients_per_round()
  if num_sampled > len(ids):
    raise ConfigError(f'fl.clients_per_round: {num_sampled} > {len(ids)} clients')
  method = build_method(config, data, choices)
  process = method.process
  runtime = dict(runtime, **client_runtime.describe(process, bool(runtime.get('workers'))))

  tf.keras.utils.set_random_seed(config.seed)
  eval_model = method.setup.model_fn()
  state = process.set_model_weights(process.initialize(), _keras_weights(eval_model))
  store = ClientStateStore()
  history = []
  start = 1
  earlier_parts = []  # Where the rounds before this process's ran (resumed runs).
  ckpt_dir = os.path.join(out_dir, 'checkpoints')
  identity = checkpoint.identity_of(config, [w.shape for w in eval_model.get_weights()])
  if resume:
    loaded = checkpoint.load(ckpt_dir, state, identity, fl.rounds)
    if loaded is not None:
      done, state, store, history, earlier_parts = loaded
      start = done + 1
  extra = method.prepare(data, store)  # Deterministic: a resumed run redoes it identically.
  extra.update(_label_correction_report(data, store))
  extra.update(_label_issue_report(data, store))
  os.makedirs(out_dir, exist_ok=True)
  writer = tf.summary.create_file_writer(os.path.join(out_dir, 'tb'))
  show = sys.stderr.isatty() if progress is None else progress
  bar = tqdm.tqdm(total=fl.rounds, initial=start - 1, disable=not show,
                  desc=f'{config.method.name}', unit='round', file=sys.stderr)
  log_lines = progress is None and not show
  round_seconds = []  # This process's rounds, for the progress lines.

  faults = config.faults
  byzantine = faults_lib.byzantine_clients(ids, faults.byzantine, config.seed)
  warned_no_reporters = False

  def client_fault(cid: str, round_num: int) -> dict:
    behaviour = faults.behaviour if cid in byzantine else None
    return faults_lib.fault_spec(behaviour, faults.factor, faults.std,
                                 faults_lib.noise_seed(config.seed, round_num, ids.index(cid)))

  for round_num in range(start, fl.rounds + 1):
    began = time.monotonic()
    everyone = method.all_clients_in_round(round_num)
    sampled = ids if everyone else sample_clients(ids, num_sampled, config.seed, round_num)
    seeds = np.random.default_rng([config.seed, round_num, 1]).integers(2**31, size=len(sampled))
    dropped = [] if everyone else faults_lib.dropped_clients(sampled, faults.dropout,
                                                             config.seed, round_num)
    if dropped:
      seeds = [s for cid, s in zip(sampled, seeds) if cid not in dropped]
      sampled = [cid for cid in sampled if cid not in dropped]

    def build_clients():
      """The round's non-empty clients' data; records each one's update weight."""
      built, built_weights = client_datasets(method, data, store, sampled, seeds,
                                             fl.batch_size)
      weights.update(built_weights)
      return built

    def build_datasets():
      return {cid: client.dataset() for cid, client in build_clients().items()}

    weights = {}  # The update weight each client's work will use.
    record = {'round': round_num}
    started = time.time()
    state, diagnostics = method.before_round(round_num, state, build_datasets, store)
    record.update(_with_truth(diagnostics, data))
    datasets = build_clients()
    record.update(clients=list(datasets), skipped_empty_clients=len(sampled) - len(datasets),
                  client_weights=[weights[cid] for cid in datasets])
    fault_args = {}
    if faults.active():
      record.update(dropped_clients=dropped,
                    byzantine_clients=[cid for cid in datasets if cid in byzantine])
      fault_args['faults'] = [client_fault(cid, round_num) for cid in datasets]
    if datasets:
      client_states = [store.objective_state(cid, process.objective, data.y[cid])
                       for cid in datasets]
      state, metrics, client_states, diagnostics = method.run_round(state, datasets,
                                                                    client_states, **fault_args)
      for cid, client_state in zip(datasets, client_states):
        store.set_objective_state(cid, client_state)
      record.update(metrics)
      record.update(_with_truth(diagnostics, data))
      record.update(_with_truth(method.report(round_num, state, store), data))
      state, diagnostics = method.after_round(round_num, state, metrics)
      record.update(diagnostics)
      if metrics['train_loss'] is None:
        warn(f'round {round_num}: every client update was non-finite and rejected; the '
              'model did not change (train_loss and train_accuracy are null)')
    else:
      record['no_reporters'] = True
      if not warned_no_reporters:
        warned_no_reporters = True
        warn(f'round {round_num}: no client reported ({len(dropped)} dropped out, '
             f'{len(sampled) - len(datasets)} had no data), so the model did not change; '
             'later rounds like this are only recorded (no_reporters: true in results.json)')
    record['seconds'] = time.time() - started
    record['wall_time'] = time.time()
    if round_num % fl.eval_every == 0 or round_num == fl.rounds:
      process.get_model_weights(state).assign_weights_to(eval_model)
      record.update(evaluate(eval_model, data.x_test, data.y_test))
    history.append(record)
    with writer.as_default(step=round_num):
      for key in ('train_loss', 'train_accuracy', 'test_accuracy', 'test_macro_f1'):
        if record.get(key) is not None:
          tf.summary.scalar(key, record[key])
    if (round_num % fl.checkpoint_every == 0 or round_num == fl.rounds
        or runtime.get('workers')):
      checkpoint.save(ckpt_dir, round_num, state, store, history, identity,
                      _runtime_parts(earlier_parts, runtime, start, round_num))
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

  process.get_model_weights(state).assign_weights_to(eval_model)
  results_lib.save_final_weights(out_dir, eval_model.get_weights())
  results = results_lib.Results(
      config=config.to_dict(), data_hash=config.data_hash(), method=config.method.name,
      params=dataclasses.asdict(choices.method_params), rounds=history,
      client_noise_rates={cid: float(r) for cid, r in zip(ids, data.noise_rates)},
      client_flip_kinds=dict(zip(ids, noise_lib.client_flip_kinds(len(ids), config.noise)
                                 or ())),
      extra=extra, device=device, runtime=runtime, byzantine_clients=byzantine,
      runtime_parts=_runtime_parts(earlier_parts, runtime, start, fl.rounds))
  results_lib.write(out_dir, results)
  return results
