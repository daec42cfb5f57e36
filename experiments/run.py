"""The ``tff-noisy`` command line.

  tff-noisy run CONFIG.yaml --out DIR [--set key=value ...] [--resume | --overwrite]
      [--workers host:port,...]
  tff-noisy compare CONFIG.yaml --methods fedavg,fedprox --out DIR [--set ...]
      [--resume | --overwrite] [--workers host:port,... | --jobs N]
  tff-noisy grid CONFIG.yaml --methods a,b --setting "k=v,k=v" ... --seeds 0,1 --out DIR
      [--resume | --overwrite] [--workers host:port,... | --jobs N]
  tff-noisy worker --port P [--host H] (--certs DIR | --insecure) [--max-concurrent-calls N]
  tff-noisy worker certs DIR [--name HOST ...]   (the TLS certificates of workers, drivers)
  tff-noisy data build CONFIG.yaml [--set ...]
  tff-noisy export RUN_DIR --quantize none|float16|dynamic|int8 [--out F] [--verify]
  tff-noisy embed pretrain|evaluate --dataset NAME ...
  tff-noisy evaluate RUN_DIR
  tff-noisy list [methods|aggregators|models|datasets|noise|partitions|faults|runtimes|
      encoders|config]
  tff-noisy report DIR [--publish DEST]  (a run, compare or grid directory: writes
                         DIR/report.md + PNGs; DEST: the study's results to commit)
  tff-noisy reproduce PAPER [--table T] [--scale cpu|paper] [--settings S,..] [--methods M,..]
      [--seeds 0,1,2] [--set ...] --out DIR [--resume | --overwrite] [--jobs N];
  tff-noisy reproduce [PAPER] --list
  tff-noisy doctor   (the GPU route: CUDA libraries, driver, GPUs, advice)

--verbose (before or after the command) shows TensorFlow's start-up log and library
warnings, which are hidden by default. --import MODULE (repeatable; run, compare, grid,
data build, reproduce, list, report) imports a module of your own first, which registers
its methods (models, aggregators), and adds it to the config's imports; such modules are
found on the Python path and in the current directory.
"""

import argparse
import atexit
import functools
import gc
import logging
import os
import signal
import sys
import warnings
import weakref
from typing import Optional


def _terminated_while_starting(_signum, _frame):
  """SIGTERM before a command has started (its modules still loading): nothing is held or
  written yet, so the process ends at once, as the command line promises for SIGTERM."""
  os.write(2, b'tff-noisy: error: terminated (SIGTERM)\n')
  os._exit(143)  # pylint: disable=protected-access


if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # Not a host program's handler.
  signal.signal(signal.SIGTERM, _terminated_while_starting)

# pylint: disable=g-import-not-at-top,wrong-import-position
from tff_noisy import catalog
from tff_noisy import config as config_lib
from tff_noisy import errors
from tff_noisy import extensions
from tff_noisy import files
from tff_noisy import methods
from tff_noisy import native_log
from tff_noisy import reproduce
from tff_noisy import validation
from tff_noisy import workers
from tff_noisy.data import sources
from experiments.embed_cli import add_embed_command
from tff_noisy.report import command as report
from tff_noisy.simulation import run_dir
from tff_noisy.simulation import run_processes
from tff_noisy.simulation import studies
from experiments import export_run
# pylint: enable=g-import-not-at-top,wrong-import-position


# Modules whose warnings speak to their developers, not to a person running tff-noisy.
_LIBRARY_MODULES = r'(tensorflow\w*|keras|tf_keras|absl)(\.|$)'  # TFF, TF-Hub, TFDS too.


def _quiet_libraries(verbose: bool) -> None:
  """Hides TensorFlow's C++ log and library warnings unless ``verbose``.

  Runs before TensorFlow is first imported (nothing the command line imports at start
  loads it), so ``TF_CPP_MIN_LOG_LEVEL`` and ``GRPC_VERBOSITY`` apply; one set in the
  environment wins over the default. ``tff-noisy: warning:`` lines are printed directly
  and always show.
  """
  if verbose:
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = '0'
    native_log.SHOW_ALL = True
    return
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')  # cuDNN/cuFFT/cuBLAS, grappler, CPU.
  os.environ.setdefault('GRPC_VERBOSITY', 'ERROR')  # gRPC's failed TLS handshakes.
  import absl.logging  # pylint: disable=g-import-not-at-top
  absl.logging.set_verbosity(absl.logging.ERROR)
  logging.getLogger('tensorflow').setLevel(logging.ERROR)
  warnings.filterwarnings('ignore', module=_LIBRARY_MODULES)
  for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
    warnings.filterwarnings('ignore', category=category)


def _load(args) -> tuple:
  """``(config, validation.Choices)``: the config file with ``--set`` applied, validated
  whole before anything heavy loads."""
  config = config_lib.load(args.config, args.set, args.imports)
  return config, validation.validate_experiment(config)


def _cmd_data_build(args) -> None:
  from tff_noisy.data import federated  # pylint: disable=g-import-not-at-top
  config, _ = _load(args)
  data = federated.build_federated_data(config, checked=True)
  print(f'federated data {config.data_hash()} ({config.data.dataset}, '
        f'{config.partition.name}, noise {config.noise.name})')
  print(federated.format_client_table(data))
  print(federated.format_transition_matrix(data))


def _run(config, out_dir, args, choices=None):
  """Runs one experiment into ``out_dir``, holding it (``run_dir.claim``) meanwhile;
  ``choices``: the config's, when it has been validated already."""
  return run_dir.run_experiment(config, out_dir, resume=args.resume,
                                overwrite=args.overwrite, workers=args.workers,
                                choices=choices)


def _cmd_run(args) -> None:
  config, choices = _load(args)
  results = _run(config, args.out, args, choices)
  print(f'{config.method.name}: final accuracy {results.final_accuracy:.4f}, '
        f'last-10 mean {results.last10_accuracy:.4f}  -> {args.out}')


def _names(text: Optional[str]) -> Optional[list]:
  """A comma-separated list, or None when the flag was not given."""
  return None if text is None else [name.strip() for name in text.split(',') if name.strip()]


def _method_names(methods: str) -> list:
  names = _names(methods)
  if not names:
    raise config_lib.ConfigError('--methods: give at least one method, e.g. fedavg,fedprox')
  return names


def _cmd_compare(args) -> None:
  config = config_lib.load(args.config, args.set, args.imports)
  names = _method_names(args.methods)
  run_all = _runs_in_processes(args, 'compare')
  with run_dir.claim(args.out, resume=args.resume, overwrite=args.overwrite):
    done = studies.compare(config, names, args.out,
                           lambda method_cfg, out, choices: _run(method_cfg, out, args,
                                                                 choices), run_all)
  width = max(16, max(len(name) for name, _ in done) + 2)
  print(f'\n{"method":<{width}}{"final":>10}{"last-10":>10}')
  for name, results in done:
    print(f'{name:<{width}}{results.final_accuracy:>10.4f}{results.last10_accuracy:>10.4f}')
  estimated = {name: report.estimated_summary(results.to_dict()) for name, results in done}
  if any(estimated.values()):
    print('\nwhat each method estimated, against the true noise of the simulation:')
    for name, lines in estimated.items():
      for i, line in enumerate(lines):
        print(f'  {name if i == 0 else "":<{width}}{line}')
  print(f'\ndata {config.data_hash()}, seed {config.seed}; '
        f'saved {os.path.join(args.out, "comparison.csv")} and comparison.png')


def _seeds(text: str) -> list:
  try:
    return [int(s) for s in text.split(',')]
  except ValueError:
    raise config_lib.ConfigError(
        f'--seeds: expected comma-separated integers, e.g. 0,1,2; got {text!r}') from None


def _cmd_grid(args) -> None:
  """Every method x setting x seed on identical data per (setting, seed); a mean table."""
  names = _method_names(args.methods)
  seeds = _seeds(args.seeds)
  run_all = _runs_in_processes(args)
  with run_dir.claim(args.out, resume=args.resume, overwrite=args.overwrite):
    table = studies.grid(args.config, args.set, names,
                         [studies.Setting.parse(s) for s in args.setting or ['']], seeds,
                         args.out,
                         lambda config, out, choices: _run(config, out, args, choices),
                         run_all=run_all, keep_finished=args.resume,
                         on_workers=bool(args.workers), imports=args.imports)
  print(table)


def _runs_in_processes(args, study: str = 'grid'):
  """The ``run_all`` of ``studies.grid`` (or ``compare``) for ``--jobs N`` above 1: N runs
  at once, each a ``tff-noisy run`` process; None for one run at a time in this process."""
  if args.jobs < 1:
    raise config_lib.ConfigError(f'--jobs: expected an integer >= 1, got {args.jobs}')
  if args.jobs == 1:
    return None
  if args.workers is not None:
    raise config_lib.ConfigError('--jobs: runs at once would share the --workers; give one '
                                 'of --jobs and --workers')
  flags = (['--resume'] if args.resume else []) + (['--overwrite'] if args.overwrite else [])
  flags += ['--verbose'] if getattr(args, 'verbose', False) else []

  def command(config_file, out_dir):
    return [sys.executable, '-m', 'experiments.run', 'run', config_file, '--out', out_dir,
            *flags]
  return lambda planned: run_processes.run_all(planned, args.out, args.jobs, command,
                                               study=study)


def _cmd_worker(args) -> None:
  if args.port is None:
    raise config_lib.ConfigError('worker: --port P is required (or `worker certs DIR`)')
  workers.serve(args.port, args.max_concurrent_calls, args.host, args.certs, args.insecure)


def _cmd_worker_certs(args) -> None:
  """A certificate authority and the workers' and drivers' certificates it signs."""
  from tff_noisy import worker_tls  # pylint: disable=g-import-not-at-top
  names = worker_tls.check_names(args.name)
  written = worker_tls.create(args.dir, args.name)
  print(f"wrote {', '.join(sorted(written))} in {args.dir} (valid "
        f"{worker_tls.VALID_DAYS} days, for drivers that dial {', '.join(names)}); the "
        "authority's key is not kept")
  print(f"  each worker: {', '.join(worker_tls.WORKER_FILES)} in a directory D; "
        'tff-noisy worker --port P --host 0.0.0.0 --certs D')
  print(f"  the driver:  {', '.join(worker_tls.DRIVER_FILES)} in a directory D; "
        f'{worker_tls.CERTS_ENV}=D tff-noisy run ... --workers HOST:P,...')


def _cmd_list(args) -> None:
  if args.markdown:
    if args.section is not None:
      raise config_lib.ConfigError('list --markdown: the whole reference, no SECTION')
    print(catalog.reference_markdown(), end='')
  else:
    print(catalog.render(args.section))


def _cmd_evaluate(args) -> None:
  """The final model of a finished run on the test split; writes RUN_DIR/evaluation.json."""
  import json  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import assembly  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
  run_dir.refuse_if_running(args.run_dir, 'evaluate')
  run = assembly.load_finished_run(args.run_dir)
  scores = driver.evaluate(run.model, run.data.x_test, run.data.y_test)
  path = os.path.join(args.run_dir, 'evaluation.json')
  files.write_file(path, json.dumps({
      'data_hash': run.results['data_hash'], 'method': run.results['method'],
      'class_names': list(run.data.class_names), **scores}, indent=1).encode())
  print(f"{run.results['method']}: test accuracy {scores['test_accuracy']:.4f}, "
        f"macro-F1 {scores['test_macro_f1']:.4f}")
  for name, accuracy in zip(run.data.class_names, scores['test_class_accuracy']):
    print(f'  {name:<24}' + ('no test examples' if accuracy is None else f'{accuracy:.4f}'))
  print(f'wrote {path}')


def _cmd_reproduce(args) -> None:
  """A paper's table as a grid, then its report beside the paper's numbers."""
  if args.list:
    print(reproduce.listing(args.paper))
    return
  if not args.paper or not args.out:
    raise config_lib.ConfigError('reproduce: give PAPER and --out DIR (or --list); '
                                 f"papers: {', '.join(reproduce.papers())}")
  table = reproduce.table_of(args.paper, args.table, args.scale)
  plan = reproduce.plan(table, args.scale, _seeds(args.seeds) if args.seeds else None,
                        args.set, _names(args.settings), _names(args.methods))
  run_all = _runs_in_processes(args)
  with run_dir.claim(args.out, resume=args.resume, overwrite=args.overwrite):
    studies.grid(plan.config_path, plan.overrides, plan.methods, plan.settings, plan.seeds,
                 args.out, lambda config, out, choices: _run(config, out, args, choices),
                 paper=table.study(args.scale, args.set, plan.methods),
                 method_overrides=plan.method_overrides, run_all=run_all,
                 keep_finished=args.resume, on_workers=bool(args.workers),
                 imports=args.imports)
  path, figures = report.write_report(args.out)
  print(f'{table.paper} {table.cite} at scale {args.scale}: wrote {path} and '
        f'{len(figures)} figure(s)')


def _cmd_doctor(args) -> None:
  del args
  from tff_noisy import cuda  # pylint: disable=g-import-not-at-top
  print('\n'.join(cuda.doctor()))


def _cmd_report(args) -> None:
  try:
    run_dir.refuse_if_running(args.dir, 'report')
  except run_dir.RunDirError:
    if not args.publish:
      raise
    print(f'{args.dir} is still being written: its own report waits until it ends; its '
          'finished runs are published')
  else:
    path, figures = report.write_report(args.dir)
    print(f'wrote {path} and {len(figures)} figure(s)')
  if args.publish:  # Finished runs only: a grid still running can be published.
    path, copied, planned = report.publish(args.dir, args.publish)
    print(f'published {copied} finished run(s) of {planned} and their report: {path}')


class _Parser(argparse.ArgumentParser):
  """Takes ``--verbose`` before or after any (sub)command: every subparser is one."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.add_argument('--verbose', action='store_true', default=argparse.SUPPRESS,
                      help="show TensorFlow's start-up log and library warnings")


def _parser() -> argparse.ArgumentParser:
  parser = _Parser(prog='tff-noisy', description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = parser.add_subparsers(dest='command', required=True)

  def with_imports(p):
    p.add_argument('--import', dest='imports', action='append', default=[],
                   metavar='MODULE', help='import this module of your own first (it '
                   "registers its methods) and add it to the config's imports; repeat")
    return p

  def with_config(p):
    p.add_argument('config', help='experiment YAML (see experiments/configs/)')
    p.add_argument('--set', action='append', default=[], metavar='KEY=VALUE',
                   help='override a config value, e.g. --set fl.rounds=20')
    return with_imports(p)

  def with_out(p, resume_help):
    p.add_argument('--out', required=True, help='output directory')
    reuse = p.add_mutually_exclusive_group()
    reuse.add_argument('--resume', action='store_true', help=resume_help)
    reuse.add_argument('--overwrite', action='store_true',
                       help='first remove the results, checkpoints and TensorBoard files '
                       'of an earlier run in --out')
    p.add_argument('--workers', metavar='HOST:PORT,...',
                   help='run the clients on these TFF workers (tff-noisy worker), split '
                   'evenly; same results as a local run')
    return p

  def with_jobs(p):
    p.add_argument('--jobs', type=int, default=1, metavar='N',
                   help='runs at once, each in a process of its own (its output in '
                   'OUT/logs/); same results as one at a time (default: 1, in this '
                   'process)')

  run = with_out(with_config(sub.add_parser('run', help='run one experiment')),
                 'continue from the last checkpoint')
  run.set_defaults(func=_cmd_run)

  compare = with_config(sub.add_parser('compare', help='several methods on identical data'))
  compare.add_argument('--methods', required=True, help='comma-separated method names')
  with_out(compare, 'resume each method run')
  with_jobs(compare)
  compare.set_defaults(func=_cmd_compare)

  grid = with_config(sub.add_parser('grid', help='methods x settings x seeds, mean table'))
  grid.add_argument('--methods', required=True, help='comma-separated method names')
  grid.add_argument('--setting', action='append', default=[],
                    help='comma-separated key=value overrides naming one setting; repeat')
  grid.add_argument('--seeds', default='0', help='comma-separated seeds')
  with_out(grid, 'continue: runs finished with the same config are kept, the rest resume '
           'or start')
  with_jobs(grid)
  grid.set_defaults(func=_cmd_grid)

  data = sub.add_parser('data', help='federated data tools')
  data_sub = data.add_subparsers(dest='data_command', required=True)
  build = with_config(data_sub.add_parser('build', help='build (or load) and describe'))
  build.set_defaults(func=_cmd_data_build)
  export_run.add_export_command(sub)
  add_embed_command(sub)

  worker = sub.add_parser('worker', help='serve TFF computations for --workers until '
                          'SIGINT or SIGTERM')
  worker.add_argument('--port', type=int, help='TCP port to listen on')
  worker.add_argument('--host', help=f'address to listen on (default {workers.LOOPBACK}: '
                      "this machine only; TFF's worker binary itself runs in a private "
                      'network namespace); on any address a worker needs --certs, on '
                      'loopback --certs or --insecure')
  worker.add_argument('--certs', metavar='DIR',
                      help='accept only drivers with a client certificate of DIR/ca.pem '
                      '(mutual TLS); DIR holds ca.pem, server.pem and server.key, written '
                      'by `tff-noisy worker certs`')
  worker.add_argument('--insecure', action='store_true', help=workers.INSECURE_HELP)
  worker.add_argument('--max-concurrent-calls', type=int, default=-1, metavar='N',
                      help='most clients trained at once (default: no limit)')
  worker_sub = worker.add_subparsers(dest='worker_command', metavar='{certs}')
  certs = worker_sub.add_parser('certs', help="write a certificate authority and the "
                                "workers' and drivers' certificates it signs into DIR")
  certs.add_argument('dir', metavar='DIR', help='a new or empty directory')
  certs.add_argument('--name', action='append', default=[], metavar='HOST',
                     help='a host name or IP address drivers dial a worker by; repeat '
                     '(localhost, 127.0.0.1 and ::1 are always in)')
  certs.set_defaults(func=_cmd_worker_certs)
  worker.set_defaults(func=_cmd_worker)

  listing = with_imports(sub.add_parser('list', help='the choices a config can name, with '
                                       'parameters'))
  listing.add_argument('section', nargs='?', metavar='SECTION',
                       help=f"one of {', '.join(catalog.SECTIONS)} (default: all), or "
                       f'{catalog.CONFIG}: every config field with its default')
  listing.add_argument('--markdown', action='store_true',
                       help=f'the whole listing as {catalog.REFERENCE} (Markdown)')
  listing.set_defaults(func=_cmd_list)

  evaluating = sub.add_parser('evaluate', help="a finished run's final model on the test "
                              'split: accuracy, macro-F1, per class')
  evaluating.add_argument('run_dir', metavar='RUN_DIR', help='--out directory of a finished run')
  evaluating.set_defaults(func=_cmd_evaluate)

  reproducing = with_imports(sub.add_parser('reproduce', help="a paper's table run as a "
                                            "grid, reported beside the paper's numbers"))
  reproducing.add_argument('paper', nargs='?', metavar='PAPER',
                           help='a paper of experiments/protocols/ (see --list)')
  reproducing.add_argument('--list', action='store_true',
                           help='papers (or only PAPER), their tables and scales, and the '
                           'time per cell measured here')
  reproducing.add_argument('--table', help="one of the paper's tables (default: its first "
                           'with a protocol at --scale)')
  reproducing.add_argument('--scale', choices=reproduce.SCALES, default='cpu',
                           help='cpu: a protocol for 2 CPU cores in the paper\'s regime; '
                           "paper: the paper's dataset, model and rounds (default: cpu)")
  reproducing.add_argument('--seeds', help="comma-separated seeds (default: the protocol's)")
  reproducing.add_argument('--settings', help="comma-separated setting ids, only these of "
                           "the table's (default: the protocol's; see the protocol file)")
  reproducing.add_argument('--methods', help="comma-separated methods, only these of the "
                           "table's (default: every one)")
  reproducing.add_argument('--set', action='append', default=[], metavar='KEY=VALUE',
                           help='override a config value in every cell, beyond the protocol '
                           '(e.g. fl.client_runtime=tf on a GPU machine); the report says so')
  reproducing.add_argument('--out', help='output directory (a grid directory)')
  reuse = reproducing.add_mutually_exclusive_group()
  reuse.add_argument('--resume', action='store_true',
                     help='continue: finished cells are kept, the rest resume or start')
  reuse.add_argument('--overwrite', action='store_true', help='start every cell afresh')
  with_jobs(reproducing)
  reproducing.set_defaults(func=_cmd_reproduce, workers=None)

  reporting = with_imports(sub.add_parser('report', help='report.md with figures of a run, '
                                          'compare or grid directory'))
  reporting.add_argument('dir', metavar='DIR',
                         help='a directory written by tff-noisy run, compare or grid')
  reporting.add_argument('--publish', metavar='DEST',
                         help="also copy the compare or grid to DEST, a folder to commit: "
                         "its manifest, table and each finished run's results.json (no "
                         "checkpoints, weights or logs), with DEST's own report; replaces "
                         "what an earlier --publish wrote there (DEST/published.json lists "
                         "it) and refuses a DEST holding anything else; DIR may still be "
                         "running. "
                         "A copy of DEST continues with --resume, keeping those runs")
  reporting.set_defaults(func=_cmd_report)

  doctor = sub.add_parser('doctor', help='the GPU route: TensorFlow\'s CUDA build, the CUDA '
                          'libraries found and loaded, the driver and GPUs, advice')
  doctor.set_defaults(func=_cmd_doctor)
  return parser


class _Terminated(KeyboardInterrupt):
  """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt."""


# Ctrl-C (SIGINT) and SIGTERM are stop requests: where the main thread runs ordinary code
# the command unwinds there (KeyboardInterrupt, _Terminated); inside a garbage-collection
# callback or a finalizer, whose exceptions Python prints and drops, the stop is retried
# every _RETRY seconds (SIGALRM) until the code is ordinary; and a command that returns with
# a stop still pending ends as stopped, never with status 0.
_RETRY = 0.05
_STOP = {'pending': None, 'accepted': False}  # pending: the signal; accepted: command runs.
_MAIN_PID = [None]  # The process whose stop requests unwind the command.
_STOPPED_BY = {signal.SIGINT: (130, 'interrupted'),
               signal.SIGTERM: (143, 'terminated (SIGTERM)')}


def _stop_requested(signum=signal.SIGTERM, frame=None):
  """The handler of SIGTERM and of Ctrl-C's SIGINT (when Python's own handler had it)."""
  if os.getpid() != _MAIN_PID[0]:  # A forked pool worker (cleanlab's):
    if signum == signal.SIGINT:
      signal.default_int_handler(signum, frame)  # Python's own Ctrl-C.
    os._exit(128 + signal.SIGTERM)  # Its pool stops it: it ends quietly, no traceback.
  _STOP['pending'] = _STOP['pending'] or signum
  _stop_if_safe(frame)


def _retry_stop(_signum, frame):
  if _STOP['pending']:
    _stop_if_safe(frame)


def _stop_if_safe(frame):
  """Raises the pending stop unless ``frame`` runs inside a GC callback or finalizer (or
  the command has returned); then retries after _RETRY seconds."""
  if not _STOP['accepted']:
    return
  if _in_finalizer(frame):
    signal.setitimer(signal.ITIMER_REAL, _RETRY)
    return
  signal.setitimer(signal.ITIMER_REAL, 0)
  _raise_pending_stop()


def _raise_pending_stop():
  raise _Terminated if _STOP['pending'] == signal.SIGTERM else KeyboardInterrupt


def _in_finalizer(frame) -> bool:
  """True when ``frame`` or a caller is a ``__del__``, a ``gc.callbacks`` function or a
  ``weakref.finalize``: code whose exceptions Python prints and drops."""
  callbacks = {getattr(callback, '__code__', None) for callback in gc.callbacks}
  while frame is not None:
    code = frame.f_code
    if (code.co_name == '__del__' or code in callbacks
        or code.co_name == '__call__' and code.co_filename == weakref.__file__):
      return True
    frame = frame.f_back
  return False


def _quiet_dropped_stop(unraisable, default_hook=sys.unraisablehook):
  """A stop that Python dropped anyway (a weakref callback): retried, unprinted."""
  if _STOP['pending'] and isinstance(unraisable.exc_value, KeyboardInterrupt):
    signal.setitimer(signal.ITIMER_REAL, _RETRY)
    return
  default_hook(unraisable)


def _accept_stops(accepted: bool) -> None:
  """While the command runs (True) SIGTERM and Ctrl-C stop it; after it returns (False) they
  unwind nothing more, so that the exit handlers run whole. A SIGINT that the command was
  started ignoring (``cmd &``) stays ignored."""
  _STOP['accepted'] = accepted
  if not accepted:
    signal.setitimer(signal.ITIMER_REAL, 0)
    return
  _STOP['pending'] = None
  _MAIN_PID[0] = os.getpid()
  signal.signal(signal.SIGTERM, _stop_requested)
  if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _stop_requested)
  signal.signal(signal.SIGALRM, _retry_stop)
  if getattr(sys.unraisablehook, 'func', None) is not _quiet_dropped_stop:
    sys.unraisablehook = functools.partial(_quiet_dropped_stop,
                                           default_hook=sys.unraisablehook)


def main(argv=None) -> None:
  """Runs a command; bad input exits 2, Ctrl-C 130 and SIGTERM 143, each with one error
  line."""
  args = _parser().parse_args(argv)
  _quiet_libraries(getattr(args, 'verbose', False))
  # SIGTERM and Ctrl-C unwind through Python: the run directory's lock is released and
  # TFF's worker stopped at exit. Python runs the handler once the running TensorFlow or
  # TFF call returns: between clients on the tf runtime, after the round's computation on
  # tff (see _stop_if_safe).
  _accept_stops(True)
  hint = '; continue with --resume' if hasattr(args, 'resume') else ''
  try:
    _refuse_undecoded_paths(args)
    if getattr(args, 'workers', None) is not None:
      args.workers = workers.parse_workers(args.workers)  # Before any work.
    if os.getcwd() not in sys.path and '' not in sys.path:  # The user's modules (--import).
      sys.path.append(os.getcwd())
    extensions.import_modules(getattr(args, 'imports', []), '--import')
    args.func(args)
    if _STOP['pending']:  # Asked to stop where it could not unwind: not a success.
      _exit_stopped(_STOP['pending'], hint)
  except KeyboardInterrupt as stop:  # Ctrl-C's, or SIGTERM's _Terminated.
    _exit_stopped(signal.SIGTERM if isinstance(stop, _Terminated) else signal.SIGINT, hint)
  except Exception as e:  # pylint: disable=broad-except
    if _STOP['pending']:  # The stop, turned into another error by the code it unwound
      _exit_stopped(_STOP['pending'], hint)  # (TensorFlow's, half-way through a call).
    if isinstance(e, (errors.UserError, sources.DatasetError, FileNotFoundError)):
      _exit(2, e)
    raise
  finally:
    _accept_stops(False)


def _refuse_undecoded_paths(args) -> None:
  """A UserError for an output path that is not UTF-8 (bytes the shell passed as they
  were): TensorFlow's writers and the JSON files take only UTF-8 names."""
  for option in ('out', 'publish'):
    path = getattr(args, option, None)
    if isinstance(path, str):
      try:
        path.encode('utf-8')
      except UnicodeEncodeError:
        shown = os.fsencode(path).decode('utf-8', 'backslashreplace')
        raise errors.UserError(f"--{option}: '{shown}' is not UTF-8; give a directory "
                               'whose name is') from None


def _exit_stopped(signum: int, hint: str) -> None:
  status, said = _STOPPED_BY[signum]
  _exit(status, f'{said}{hint}')


def _exit(status: int, message) -> None:
  print(f'{errors.PROG}: error: {errors.shorten(str(message), 2000)}', file=sys.stderr)
  sys.exit(status)


def cli() -> None:
  """The ``tff-noisy`` program: ``main``, then the process ends without Python's
  teardown of TensorFlow and TFF (2-3 s after every command that trained). The exit
  handlers run first (TFF's worker is stopped) and the output is flushed; every file a
  command writes is closed when it returns. Output piped into a reader that stops early
  (``| head``) ends the command quietly. An unexpected exception ends the process as
  Python would."""
  try:
    main()
    status = 0
  except BrokenPipeError:  # Python's advice: no more writes to the closed pipe.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
  except SystemExit as e:
    if e.code is None or isinstance(e.code, int):
      status = e.code or 0
    else:  # sys.exit(message): Python prints it and exits 1.
      print(e.code, file=sys.stderr)
      status = 1
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  sys.stdout.flush()
  sys.stderr.flush()
  # From here a stop signal is held back until the exit: one that came before is counted.
  signal.pthread_sigmask(signal.SIG_BLOCK, set(_STOPPED_BY))
  stop = _pending_stop()
  if stop and status == 0:  # After the command returned: never a success.
    status, said = _STOPPED_BY[stop]
    os.write(2, f'{errors.PROG}: error: {said} as it was ending; what it printed above is '
             'complete\n'.encode())
  os._exit(status)


def _pending_stop():
  """The stop signal received so far (a function, so that Python has run the handlers of
  signals that arrived before the caller blocked them)."""
  return _STOP['pending']


if __name__ == '__main__':
  cli()
