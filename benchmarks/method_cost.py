"""Seconds per round of each method beside FedAvg on one config, rounds interleaved.

Every method is built on the same federated data and trains on the same sampled clients
each round; the methods take turns round by round, so a change in the machine's load
stretches them alike, and each method's time is the median over ``--rounds`` rounds
after one that traces. A method whose client parts have a ``corrected`` phase (FedEFC,
forward correction) is timed twice: as it starts (cross-entropy, phase 0) and with the
phase set to 1 (its per-round transition-matrix pass over the client's data and the
corrected loss). Before round 1 each method's ``prepare`` runs once against an empty
cache, so its one-off cost (LSC: the encoder's embeddings) and the bytes it caches are
measured too. The project's targets: a corrected FedEFC round <= 1.5x a FedAvg
round; an LSC round <= 1.5x a FedAvg round.

With ``--runtimes tff,tf`` every method runs on each client runtime (``fl.client_runtime``)
in the same interleaved rounds, and each row also gives its ratio to the same method on
the first runtime. The project's target: seconds per round with ``tf`` <= 1.0x ``tff`` on the
FedEFC, LSC and MaskedOptim configs (goal 0.7x), and >= 5x faster on the demo config.

  .venv/bin/python benchmarks/method_cost.py experiments/configs/fedefc_fmnist.yaml \\
      --methods fedavg,forward_correction,fedefc [--rounds 5] [--runtimes tff,tf]
      [--set key=value ...]

Writes benchmarks/results/method_cost_<config name>.json, or with more than one runtime
benchmarks/results/runtimes_<config name>.json.
"""

import argparse
import dataclasses
import json
import os
import platform
import statistics
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top

from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
from tff_noisy import files  # pylint: disable=g-import-not-at-top
from tff_noisy import validation  # pylint: disable=g-import-not-at-top
from tff_noisy.data import federated as federated_data  # pylint: disable=g-import-not-at-top
from tff_noisy.data import sources  # pylint: disable=g-import-not-at-top
from tff_noisy.methods import recipe  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import assembly  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import rounds  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import studies  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation.client_state import ClientStateStore  # pylint: disable=g-import-not-at-top

RESULTS = os.path.join(os.path.dirname(__file__), 'results')
PHASE = 'corrected'  # The client parts' hparam of a two-phase method.


class Variant:
  """One method (in one phase): its process state and client state store."""

  def __init__(self, name, config, data):
    self.name = name
    self.method = assembly.build_method(config, data, validation.validate_experiment(config))
    self.state = assembly.initial_state(self.method.process, self.method.setup.model_fn())
    self.store = ClientStateStore()
    self.server = recipe.ServerContext(self.method.process, self.method.setup, data,
                                       self.store)
    self.round_seconds = []
    with tempfile.TemporaryDirectory() as cache:
      previous = os.environ.get(sources.CACHE_ENV)
      os.environ[sources.CACHE_ENV] = cache
      try:
        started = time.perf_counter()
        for step in self.method.recipe.server:
          step.prepare(self.server)
        self.prepare_seconds = time.perf_counter() - started
        self.cached_bytes = sum(os.path.getsize(os.path.join(d, f))
                                for d, _, files in os.walk(cache) for f in files)
      finally:
        if previous is None:
          del os.environ[sources.CACHE_ENV]
        else:
          os.environ[sources.CACHE_ENV] = previous

  @property
  def has_phases(self) -> bool:
    return PHASE in self.method.process.program.hparams

  def set_phase(self, phase: int) -> None:
    self.name = f'{self.name.split(" (")[0]} ({PHASE}={phase})'
    process = self.method.process
    hparams = dict(process.get_hparams(self.state), **{PHASE: phase})
    self.state = process.set_hparams(self.state, hparams)

  def run_round(self, round_num, data, sampled, seeds, batch_size):
    datasets, _ = driver.client_datasets(self.method.recipe.data, data, self.store, sampled,
                                         seeds, batch_size)
    process = self.method.process
    client_states = [self.store.objective_state(cid, process.program, data.y[cid])
                     for cid in datasets]
    started = time.perf_counter()
    trained = rounds.train(self.method.recipe, process, round_num, self.state, datasets,
                           client_states, None, self.server)
    self.state = trained.state
    self.round_seconds.append(time.perf_counter() - started)
    for cid, client_state in zip(datasets, trained.client_states):
      self.store.set_objective_state(cid, client_state)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('config')
  parser.add_argument('--methods', required=True, help='comma-separated; fedavg first')
  parser.add_argument('--rounds', type=int, default=5, help='timed rounds after the first')
  parser.add_argument('--runtimes', default=None,
                      help="comma-separated fl.client_runtime values (default: the config's)")
  parser.add_argument('--set', action='append', default=[], metavar='KEY=VALUE')
  args = parser.parse_args()
  base = config_lib.load(args.config, args.set)
  runtimes = args.runtimes.split(',') if args.runtimes else [base.fl.client_runtime]
  configs = {}
  for name in args.methods.split(','):
    for runtime in runtimes:
      config = studies.method_config(base, name)
      config.fl = dataclasses.replace(config.fl, client_runtime=runtime)
      configs[f'{name} [{runtime}]' if len(runtimes) > 1 else name] = config
  data = federated_data.build_federated_data(base)
  load_before = os.getloadavg()
  variants = []
  for name, config in configs.items():
    variants.append(Variant(name, config, data))
    if variants[-1].has_phases:
      variants[-1].set_phase(0)
      variants.append(Variant(name, config, data))
      variants[-1].set_phase(1)
  ids = list(data.client_ids)
  for round_num in range(1, args.rounds + 2):
    sampled = driver.sample_clients(ids, base.clients_per_round(), base.seed, round_num)
    seeds = np.random.default_rng([base.seed, round_num, 1]).integers(2**31, size=len(sampled))
    for variant in variants:
      variant.run_round(round_num, data, sampled, seeds, base.fl.batch_size)
    print(f'round {round_num}: ' + ', '.join(
        f'{v.name} {v.round_seconds[-1]:.2f} s' for v in variants), flush=True)

  reference = statistics.median(variants[0].round_seconds[1:])
  medians = {v.name: statistics.median(v.round_seconds[1:]) for v in variants}
  rows = {v.name: {'median_s_per_round': medians[v.name],
                   'ratio_to_' + variants[0].name: medians[v.name] / reference,
                   'round_seconds': v.round_seconds,
                   'prepare_s': v.prepare_seconds, 'prepare_cached_bytes': v.cached_bytes,
                   'runtime': v.method.process.clients.describe()
                              if v.method.process.clients else {'client_runtime': 'tff'}}
          for v in variants}
  if len(runtimes) > 1:  # Each method (and phase) against itself on the first runtime.
    for name, row in rows.items():
      first = name.replace(f'[{row["runtime"]["client_runtime"]}]', f'[{runtimes[0]}]', 1)
      row['ratio_to_' + runtimes[0]] = medians[name] / medians[first]
  print(f'\n{"method":<40}{"s/round":>9}{"ratio":>8}{"vs " + runtimes[0]:>8}'
        f'{"prepare s":>11}{"cached MB":>11}')
  for name, row in rows.items():
    print(f'{name:<40}{row["median_s_per_round"]:>9.2f}'
          f'{row["ratio_to_" + variants[0].name]:>8.2f}'
          f'{row.get("ratio_to_" + runtimes[0], 1.0):>8.2f}{row["prepare_s"]:>11.1f}'
          f'{row["prepare_cached_bytes"] / 1e6:>11.1f}')
  os.makedirs(RESULTS, exist_ok=True)
  name = os.path.splitext(os.path.basename(args.config))[0]
  prefix = 'runtimes' if len(runtimes) > 1 else 'method_cost'
  path = os.path.join(RESULTS, f'{prefix}_{name}.json')
  with open(path, 'w') as f:
    root = os.path.join(os.path.dirname(__file__), '..')
    json.dump({'config': files.portable_path(args.config, root),
               'overrides': files.portable_overrides(args.set, root), 'rounds': args.rounds,
               'runtimes': runtimes,
               'clients_per_round': base.clients_per_round(),
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform(),
                           'load_average_before': load_before,
                           'load_average_after': os.getloadavg()},
               'methods': rows}, f, indent=1)
  print(f'wrote {path}')


if __name__ == '__main__':
  main()
