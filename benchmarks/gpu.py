"""One round of a CIFAR-10-shaped protocol on each client runtime, with and without a GPU.

FedAvg with ``resnet20`` (GroupNorm), ``--clients`` clients of ``--examples`` 32x32x3
images each, E=``--epochs``, B=``--batch-size``, SGD 0.05; by default 10 clients x 500
images, E=5, B=64. The images are random (uniform, seeded) unless CIFAR-10 is in the
TFDS data directory: the benchmark times the machinery, not accuracy. Each variant runs
in its own process, a first round to trace and a second timed:

- ``tff``: TFF's worker (CPU only, whatever the machine has);
- ``tf-cpu``: the in-process runtime with the GPUs hidden;
- ``tf-gpu``: the in-process runtime on the GPU (skipped, saying "no GPU", without one).

It records the device the clients trained on, seconds per round, the path the ``tf``
runtime took (stacked or one call per client, and why) and the GPU's peak memory.

  .venv/bin/python benchmarks/gpu.py [--clients 10] [--examples 500] [--epochs 5]
      [--batch-size 64]

Writes benchmarks/results/gpu.json.
"""

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'gpu.json')
_ROOT = os.path.join(os.path.dirname(__file__), '..')
VARIANTS = {'tff': ('tff', True), 'tf-cpu': ('tf', True), 'tf-gpu': ('tf', False)}
NO_GPU = 3  # A child's exit status: the variant needs a GPU and TensorFlow sees none.
NEEDS = ('tensorflow', 'tensorflow_federated')


def missing_packages() -> list:
  """The packages in ``NEEDS`` that this Python cannot import."""
  return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def _data(num_clients: int, examples: int, seed: int = 0):
  """``FederatedData`` of CIFAR-10-shaped clients (CIFAR-10 from TFDS if present)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tff_noisy.data import federated as federated_data  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  total = num_clients * examples
  source = 'random uniform 32x32x3'
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    x, y = tfds.as_numpy(tfds.load('cifar10', split=f'train[:{total}]', batch_size=-1,
                                   as_supervised=True, download=False))
    x = x.astype(np.float32) / 255.0
    source = 'CIFAR-10 (TFDS)'
  except Exception:  # pylint: disable=broad-except  # Absent offline: random images.
    x = rng.random((total, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, total)
  ids = [f'client_{i:03d}' for i in range(num_clients)]
  part = {cid: slice(i * examples, (i + 1) * examples) for i, cid in enumerate(ids)}
  data = federated_data.FederatedData(
      dataset_name='cifar10-shaped', num_classes=10, input_shape=(32, 32, 3),
      class_names=[str(c) for c in range(10)], config_hash='gpu-benchmark', client_ids=ids,
      x={cid: x[s] for cid, s in part.items()}, y={cid: y[s] for cid, s in part.items()},
      y_true={cid: y[s] for cid, s in part.items()}, noise_rates=np.zeros(num_clients),
      transition_matrices=np.tile(np.eye(10), (num_clients, 1, 1)),
      x_test=x[:10], y_test=y[:10])
  return data, source


def measure(variant: str, args) -> dict:
  """Two rounds of the protocol on ``variant`` in this process; the second timed."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  runtime, _ = VARIANTS[variant]
  gpus = tf.config.list_physical_devices('GPU')
  if variant == 'tf-gpu' and not gpus:
    sys.exit(NO_GPU)
  for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
  from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import assembly  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import rounds  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation.client_state import ClientStateStore  # pylint: disable=g-import-not-at-top
  config = config_lib.from_dict({
      'seed': 0, 'partition': {'num_clients': args.clients}, 'model': {'name': 'resnet20'},
      'fl': {'rounds': 2, 'participation': 1.0, 'local_epochs': args.epochs,
             'batch_size': args.batch_size, 'client_lr': 0.05,
             'client_runtime': runtime}})
  data, source = _data(args.clients, args.examples)
  method = assembly.build_method(config, data)
  process = method.process
  tf.keras.utils.set_random_seed(0)
  state = assembly.initial_state(process, method.setup.model_fn())
  seconds = []
  for round_num in (1, 2):
    seeds = np.random.default_rng([0, round_num, 1]).integers(2**31, size=args.clients)
    started = time.perf_counter()
    clients, _ = driver.client_datasets(method.recipe.data, data, ClientStateStore(), data.client_ids,
                                        seeds, args.batch_size)
    trained = rounds.train(method.recipe, process, round_num, state, clients,
                           [()] * len(clients), None, None)
    state, metrics = trained.state, trained.metrics
    seconds.append(time.perf_counter() - started)
    print(f'  {variant}: round {round_num} {seconds[-1]:.1f} s, train loss '
          f'{metrics["train_loss"]:.3f}', file=sys.stderr, flush=True)
  peak = (tf.config.experimental.get_memory_info('GPU:0')['peak'] if gpus and runtime == 'tf'
          else None)
  return {'variant': variant, 'runtime': assembly.describe_runtime(process), 'data': source,
          'first_round_s': seconds[0], 'round_s': seconds[1],
          'gpus_seen': [g.name for g in gpus], 'gpu_peak_memory_bytes': peak}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--clients', type=int, default=10)
  parser.add_argument('--examples', type=int, default=500, help='examples per client')
  parser.add_argument('--epochs', type=int, default=5)
  parser.add_argument('--batch-size', type=int, default=64)
  parser.add_argument('--variants', default=','.join(VARIANTS))
  parser.add_argument('--one', choices=list(VARIANTS), help=argparse.SUPPRESS)
  args = parser.parse_args()
  missing = missing_packages()
  if missing:
    sys.exit(f'benchmarks/gpu.py: error: {sys.executable} (Python '
             f'{platform.python_version()}) has no {", ".join(missing)}. Run it with the '
             "project's environment, .venv/bin/python (`make install`): TFF 0.87 pins "
             'TensorFlow 2.14, which has wheels for Python 3.9-3.11 only.')
  if args.one:
    print(json.dumps(measure(args.one, args)))
    return
  rows = []
  for variant in args.variants.split(','):
    env = dict(os.environ)
    if VARIANTS[variant][1]:  # Hide the GPUs from the CPU variants.
      env['CUDA_VISIBLE_DEVICES'] = '-1'
    else:
      env.pop('CUDA_VISIBLE_DEVICES', None)
    child = subprocess.run(
        [sys.executable, __file__, '--one', variant, '--clients', str(args.clients),
         '--examples', str(args.examples), '--epochs', str(args.epochs),
         '--batch-size', str(args.batch_size)],
        cwd=_ROOT, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if child.returncode == NO_GPU:
      print(f'{variant}: no GPU (TensorFlow sees none on this machine)')
      rows.append({'variant': variant, 'skipped': 'no GPU'})
      continue
    if child.returncode:
      sys.exit(f'benchmarks/gpu.py: error: the {variant} variant failed (exit status '
               f'{child.returncode}); its error is above.')
    rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
  reference = next((r for r in rows if r['variant'] == 'tff'), None)
  print(f'\n{"variant":>8}{"s/round":>9}{"x tff":>7}  clients trained on / path')
  for row in rows:
    if 'skipped' in row:
      print(f'{row["variant"]:>8}  {row["skipped"]}')
      continue
    row['speedup_vs_tff'] = reference['round_s'] / row['round_s'] if reference else None
    memory = row['gpu_peak_memory_bytes']
    print(f'{row["variant"]:>8}{row["round_s"]:>9.1f}{row["speedup_vs_tff"] or 0:>7.1f}  '
          f'{row["runtime"]["clients_trained_on"]}, {row["runtime"].get("path", "")}'
          + (f', GPU peak {memory / 2**30:.2f} GiB' if memory else ''))
  os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
  with open(RESULTS, 'w') as f:
    json.dump({'protocol': {'model': 'resnet20', 'clients': args.clients,
                            'examples_per_client': args.examples, 'local_epochs': args.epochs,
                            'batch_size': args.batch_size},
               'variants': rows,
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform()}},
              f, indent=1)
  print(f'wrote {RESULTS}')


if __name__ == '__main__':
  main()
