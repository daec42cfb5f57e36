"""When stacking clients pays on the CPU: the ``tf`` runtime stacked against one call per client.

FedAvg on one config's clients, ``fl.client_runtime: tf`` with ``fl.stack_clients: true``
and ``false``, for each (MLP width, batch size, local epochs) point: both train the same
sampled clients each round, taking turns round by round, and each time is the median over
``--rounds`` rounds after one that traces. ``fl.stack_clients: null`` stacks on the CPU
when the median client takes at most ``tf_clients.CPU_MAX_STACKED_CLIENT_STEPS`` steps a
round and the model has no convolution, which these ratios set; each row says what it
picks. A point's width 0 keeps the config's model as it is (one without a width option).

  .venv/bin/python benchmarks/stacking.py [experiments/configs/fedln_fmnist.yaml]
      [--points 16x128x1,256x128x1,64x16x1,64x128x5,1024x128x5,16x16x5] [--rounds 3]
      [--set key=value ...] [--out NAME]

Writes benchmarks/results/NAME.json (default: stacking_<config name>).
"""

import argparse
import json
import os
import platform
import statistics

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top

import method_cost  # pylint: disable=g-import-not-at-top
from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
from tff_noisy import files  # pylint: disable=g-import-not-at-top
from tff_noisy.data import federated as federated_data  # pylint: disable=g-import-not-at-top
from tff_noisy.federated import client_parts  # pylint: disable=g-import-not-at-top
from tff_noisy.runtime import tf_clients  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import assembly  # pylint: disable=g-import-not-at-top
from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top

RESULTS = os.path.join(os.path.dirname(__file__), 'results')
DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), '..', 'experiments', 'configs',
                              'fedln_fmnist.yaml')


def measure_point(args, width: int, batch_size: int, epochs: int, data) -> dict:
  """Median seconds per round, stacked and one call per client, at one point."""
  overrides = args.set + ['method.name=fedavg', 'method.params={}', 'fl.client_runtime=tf',
                          f'fl.batch_size={batch_size}', f'fl.local_epochs={epochs}']
  if width:  # 0: the config's model as it is (one without a width option).
    overrides.append(f'model.width={width}')
  variants = {stack: method_cost.Variant(
      f'stack_clients={stack}', config_lib.load(args.config, overrides + [
          f'fl.stack_clients={str(stack).lower()}']), data) for stack in (True, False)}
  base = config_lib.load(args.config, overrides)
  ids = list(data.client_ids)
  for round_num in range(1, args.rounds + 2):
    sampled = driver.sample_clients(ids, base.clients_per_round(), base.seed, round_num)
    seeds = np.random.default_rng([base.seed, round_num, 1]).integers(2**31, size=len(sampled))
    for variant in variants.values():
      variant.run_round(round_num, data, sampled, seeds, batch_size)
  stacked_s, each_s = (statistics.median(variants[s].round_seconds[1:]) for s in (True, False))
  steps = assembly.median_client_steps(data, epochs, batch_size)
  return {'width': width, 'batch_size': batch_size, 'local_epochs': epochs,
          'median_client_steps': steps,
          'stacked_s_per_round': stacked_s, 'one_call_per_client_s_per_round': each_s,
          'stacked_over_one_call': stacked_s / each_s,
          'default_on_cpu_stacks': not tf_clients.why_not_stacked(
              variants[True].method.setup.model_fn(),
              client_parts.ClientProgram([client_parts.CrossEntropy()]), None, 'CPU', steps),
          'round_seconds': {str(s): v.round_seconds for s, v in variants.items()}}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('config', nargs='?', default=DEFAULT_CONFIG)
  parser.add_argument('--points', default='16x128x1,256x128x1,64x16x1,64x128x5,1024x128x5,16x16x5',
                      help='comma-separated WIDTHxBATCHxEPOCHS')
  parser.add_argument('--rounds', type=int, default=3, help='timed rounds after the first')
  parser.add_argument('--set', action='append', default=[], metavar='KEY=VALUE')
  parser.add_argument('--out', help='results file name without .json')
  args = parser.parse_args()
  points = [tuple(int(v) for v in p.split('x')) for p in args.points.split(',')]
  data = federated_data.build_federated_data(config_lib.load(args.config, args.set))
  load_before = os.getloadavg()
  rows = []
  print(f'{"width":>6}{"batch":>6}{"epochs":>7}{"steps":>7}{"stacked s":>11}'
        f'{"one call s":>11}{"ratio":>7}  default on the CPU', flush=True)
  for width, batch_size, epochs in points:
    row = measure_point(args, width, batch_size, epochs, data)
    rows.append(row)
    print(f'{width:>6}{batch_size:>6}{epochs:>7}{row["median_client_steps"]:>7}'
          f'{row["stacked_s_per_round"]:>11.2f}{row["one_call_per_client_s_per_round"]:>11.2f}'
          f'{row["stacked_over_one_call"]:>7.2f}  '
          + ('stacked' if row['default_on_cpu_stacks'] else 'one call per client'), flush=True)
  name = args.out or 'stacking_' + os.path.splitext(os.path.basename(args.config))[0]
  path = os.path.join(RESULTS, name + '.json')
  os.makedirs(RESULTS, exist_ok=True)
  with open(path, 'w') as f:
    root = os.path.join(os.path.dirname(__file__), '..')
    json.dump({'config': files.portable_path(args.config, root),
               'overrides': files.portable_overrides(args.set, root), 'rounds': args.rounds,
               'cpu_max_stacked_client_steps': tf_clients.CPU_MAX_STACKED_CLIENT_STEPS,
               'points': rows,
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform(),
                           'load_average_before': load_before,
                           'load_average_after': os.getloadavg()}}, f, indent=1)
  print(f'wrote {path}')


if __name__ == '__main__':
  main()
