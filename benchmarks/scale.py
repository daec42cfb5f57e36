"""Seconds per round and peak memory with 10 to 10,000 participating clients, per runtime.

Each (runtime, size) runs in its own Python process (so each peak is its own): FedAvg
with the `mlp` model, E=1, every client sampled every round, through the driver's own
round (``driver.client_datasets`` then ``rounds.train``) on the client runtime
``--runtime`` names (``fl.client_runtime``: ``tff``, TFF's local C++ worker; ``tf``, this
process's TensorFlow with clients stacked per call). Each client holds ``--examples``
scikit-learn digits drawn with replacement (seeded): the benchmark measures the
machinery, not accuracy, and digits has too few images to give 10,000 clients 20
distinct ones each. Per size it reports the median seconds of the rounds after the
first two (the first traces and compiles, the second still warms TFF's caches), split
into building the clients' ``ClientData`` in Python and ``process.next`` (``tff``: each
client's ``tf.data`` dataset built and serialised into the computation, the clients'
training in the worker, the aggregation; ``tf``: the batch orders, the stacked training,
the aggregation in TFF's worker), the peak resident memory (VmHWM) of the driver process
and of TFF's ``worker_binary``, and each runtime's clients per second against ``tff``'s
at the same size, measured in the same invocation.

The ceiling, measured in the same invocation at each size (``--ceiling``, in its own
process): (a) a hand-written stacked step of the same arithmetic (the MLP's layers as
batched products over the client axis, softmax cross-entropy, SGD at the same rate, the
same batches and clients per call as the ``tf`` runtime, the data already in memory as
one array, no shuffling) and (b) the bare batched matrix products of one step of those
shapes, forward and backward (``x·W1``, ``h·W2``, ``g·W2ᵀ``, ``xᵀ·g1``, ``hᵀ·g``). Each
runtime's updates/s is reported as a fraction of both. The FLOPs per update are counted
from those products: 2·B·(2·d·h + 3·h·C) per step (d inputs, h hidden, C classes, B
examples a batch), times the steps of a client's round.
The project's targets: time per round grows no faster than linearly in participating
clients; 10,000 clients per round fit in 8 GB, driver plus worker; the ``tf`` runtime at
10,000 clients >= 10x ``tff``'s clients per second, goal 30x; peak memory per client
<= ``tff``'s.

  .venv/bin/python benchmarks/scale.py [--runtime tff,tf] [--clients 10,100,1000,10000]
      [--rounds 4] [--examples 20] [--batch-size 10]

Writes benchmarks/results/scale.json.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

WARMUP_ROUNDS = 2  # Not timed: tracing, then TFF's first-call caches.
RESULTS = os.path.join(os.path.dirname(__file__), 'results', 'scale.json')
_ROOT = os.path.join(os.path.dirname(__file__), '..')


def peak_rss_bytes(pid='self') -> int:
  """A process's peak resident set size (Linux ``VmHWM``)."""
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmHWM:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f'no VmHWM for process {pid}')


def cpu_seconds(pid='self') -> float:
  """User plus system CPU seconds a process has used, all its threads."""
  with open(f'/proc/{pid}/stat') as f:
    fields = f.read().rsplit(')', 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _config(num_clients: int, batch_size: int, runtime: str):
  from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.from_dict({
      'seed': 0,
      'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': num_clients},
      'model': {'name': 'mlp'},
      'method': {'name': 'fedavg'},
      'fl': {'rounds': 1, 'clients_per_round': num_clients, 'local_epochs': 1,
             'batch_size': batch_size, 'client_lr': 0.05, 'client_runtime': runtime},
  })


def _clients_with_replacement(num_clients: int, examples: int, seed: int = 0):
  """``FederatedData`` of ``num_clients`` clients, each ``examples`` digits drawn with
  replacement (clean labels)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tff_noisy.data import federated as federated_data  # pylint: disable=g-import-not-at-top
  from tff_noisy.data import sources  # pylint: disable=g-import-not-at-top
  source = sources.load_dataset('digits')
  rng = np.random.default_rng(seed)
  ids = [f'client_{i:05d}' for i in range(num_clients)]
  picks = {cid: rng.integers(len(source.y_train), size=examples) for cid in ids}
  num_classes = source.num_classes
  return federated_data.FederatedData(
      dataset_name='digits', num_classes=num_classes,
      input_shape=tuple(source.input_shape), class_names=source.class_names,
      config_hash='scale-benchmark', client_ids=ids,
      x={cid: source.x_train[p] for cid, p in picks.items()},
      y={cid: source.y_train[p] for cid, p in picks.items()},
      y_true={cid: source.y_train[p] for cid, p in picks.items()},
      noise_rates=np.zeros(num_clients),
      transition_matrices=np.tile(np.eye(num_classes), (num_clients, 1, 1)),
      x_test=source.x_test, y_test=source.y_test)


def measure_ceiling(num_clients: int, rounds: int, examples: int, batch_size: int,
                    clients_per_call: int, width: int = 128) -> dict:
  """The hand-written stacked step's and the bare products' updates/s (module doc)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  data = _clients_with_replacement(num_clients, examples)
  steps = -(-examples // batch_size)
  padded = steps * batch_size  # The last batch padded with the first examples.
  x = np.stack([np.resize(data.x[c].reshape(examples, -1), (padded, data.x[c][0].size))
                for c in data.client_ids]).astype(np.float32)
  y = np.stack([np.resize(data.y[c], padded) for c in data.client_ids]).astype(np.int32)
  d, h, c = x.shape[-1], width, data.num_classes
  x = x.reshape(num_clients, steps, batch_size, d)
  y = y.reshape(num_clients, steps, batch_size)
  rng = np.random.default_rng(0)
  start = [rng.normal(0, 0.1, (d, h)), np.zeros(h), rng.normal(0, 0.1, (h, c)), np.zeros(c)]
  start = [tf.constant(v, tf.float32) for v in start]
  lr = 0.05

  @tf.function
  def hand_step(xg, yg):
    """A group's round: ``steps`` SGD steps of every client at once; the updates."""
    group = tf.shape(xg)[0]
    w = [tf.broadcast_to(v, tf.concat([[group], tf.shape(v)], 0)) for v in start]
    for step in range(steps):
      with tf.GradientTape() as tape:
        tape.watch(w)
        hidden = tf.nn.relu(tf.einsum('gbd,gdh->gbh', xg[:, step], w[0]) + w[1][:, None])
        logits = tf.einsum('gbh,ghc->gbc', hidden, w[2]) + w[3][:, None]
        loss = tf.reduce_sum(tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(yg[:, step], logits), 1))
      w = [v - lr * g for v, g in zip(w, tape.gradient(loss, w))]
    return [s[None] - v for s, v in zip(start, w)]

  @tf.function
  def products(xg, w1, w2, grad_logits):
    """The bare products of ``steps`` steps of a group, forward and backward."""
    total = tf.zeros([])
    for step in range(steps):
      hidden = tf.matmul(xg[:, step], w1)
      logits = tf.matmul(hidden, w2)
      grad_hidden = tf.matmul(grad_logits, w2, transpose_b=True)
      grad_w1 = tf.matmul(xg[:, step], grad_hidden, transpose_a=True)
      grad_w2 = tf.matmul(hidden, grad_logits, transpose_a=True)
      total += (tf.reduce_sum(logits[:, 0, 0]) + tf.reduce_sum(grad_w1[:, 0, 0])
                + tf.reduce_sum(grad_w2[:, 0, 0]))
    return total

  groups = [slice(i, i + clients_per_call) for i in range(0, num_clients, clients_per_call)]
  xs = [tf.constant(x[g]) for g in groups]
  ys = [tf.constant(y[g]) for g in groups]
  weights = [(tf.constant(rng.normal(0, 0.1, (len(x[g]), d, h)), tf.float32),
              tf.constant(rng.normal(0, 0.1, (len(x[g]), h, c)), tf.float32),
              tf.constant(rng.normal(0, 0.1, (len(x[g]), batch_size, c)), tf.float32))
             for g in groups]

  def timed(run):
    seconds = []
    for _ in range(rounds):
      started = time.perf_counter()
      run()
      seconds.append(time.perf_counter() - started)
    return statistics.median(seconds[WARMUP_ROUNDS:])

  def hand_round():
    updates = [hand_step(xg, yg) for xg, yg in zip(xs, ys)]
    mean = [tf.add_n([tf.reduce_sum(u[k], 0) for u in updates]) / num_clients
            for k in range(4)]
    [v.numpy() for v in mean]  # pylint: disable=expression-not-assigned

  def product_round():
    sum(float(products(xg, *w)) for xg, w in zip(xs, weights))

  hand_s, products_s = timed(hand_round), timed(product_round)
  flops = steps * 2 * batch_size * (2 * d * h + 3 * h * c)
  return {'clients': num_clients, 'clients_per_call': clients_per_call,
          'hand_step_s': hand_s, 'products_s': products_s,
          'hand_step_updates_per_s': num_clients / hand_s,
          'products_updates_per_s': num_clients / products_s,
          'flops_per_update': flops,
          'flops_counted_as': f'{steps} steps x 2*B*(2*d*h + 3*h*C), B={batch_size}, '
                              f'd={d}, h={h}, C={c}',
          'products_gflops_per_s': flops * num_clients / products_s / 1e9}


def measure_one(num_clients: int, rounds: int, examples: int, batch_size: int,
                runtime: str) -> dict:
  """Runs ``rounds`` rounds with ``num_clients`` clients in this process."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tff_noisy import tff_runtime  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import assembly  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import driver  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation import rounds as round_lib  # pylint: disable=g-import-not-at-top
  from tff_noisy.simulation.client_state import ClientStateStore  # pylint: disable=g-import-not-at-top

  config = _config(num_clients, batch_size, runtime)
  data = _clients_with_replacement(num_clients, examples)
  method = assembly.build_method(config, data)
  process = method.process
  tf.keras.utils.set_random_seed(0)  # The same initial model on every runtime.
  state = assembly.initial_state(process, method.setup.model_fn())
  store = ClientStateStore()
  rss_before_rounds = peak_rss_bytes()
  # TFF started its worker for process.initialize.
  workers = [p.pid for p in tff_runtime._worker_processes() if p.poll() is None]  # pylint: disable=protected-access
  build_s, next_s, next_driver_cpu_s, next_worker_cpu_s = [], [], [], []
  for round_num in range(1, rounds + 1):
    seeds = np.random.default_rng([0, round_num, 1]).integers(2**31, size=num_clients)
    started = time.perf_counter()
    with round_lib.collector_paused():  # As the driver's round builds its clients.
      datasets, _ = driver.client_datasets(method.recipe.data, data, store, data.client_ids,
                                           seeds, batch_size)
    built = time.perf_counter()
    cpu_before = cpu_seconds(), sum(cpu_seconds(pid) for pid in workers)
    trained = round_lib.train(method.recipe, process, round_num, state, datasets,
                           [()] * len(datasets), None, None)
    state, metrics = trained.state, trained.metrics
    build_s.append(built - started)
    next_s.append(time.perf_counter() - built)
    next_driver_cpu_s.append(cpu_seconds() - cpu_before[0])
    next_worker_cpu_s.append(sum(cpu_seconds(pid) for pid in workers) - cpu_before[1])
    del datasets
    print(f'  {runtime}: {num_clients} clients, round {round_num}: datasets {build_s[-1]:.2f} s, '
          f'process.next {next_s[-1]:.2f} s (CPU: driver {next_driver_cpu_s[-1]:.2f} s, '
          f'worker {next_worker_cpu_s[-1]:.2f} s), train loss {metrics["train_loss"]:.3f}',
          file=sys.stderr, flush=True)
  worker_rss = sum(peak_rss_bytes(pid) for pid in workers)
  later = slice(WARMUP_ROUNDS, None)
  return {
      'runtime': runtime, 'runtime_record': assembly.describe_runtime(process),
      'clients': num_clients, 'examples_per_client': examples, 'batch_size': batch_size,
      'rounds': rounds,
      'first_round_s': build_s[0] + next_s[0],
      'round_s': statistics.median(b + n for b, n in zip(build_s[later], next_s[later])),
      'datasets_s': statistics.median(build_s[later]),
      'process_next_s': statistics.median(next_s[later]),
      'process_next_driver_cpu_s': statistics.median(next_driver_cpu_s[later]),
      'process_next_worker_cpu_s': statistics.median(next_worker_cpu_s[later]),
      'datasets_s_per_round': build_s, 'process_next_s_per_round': next_s,
      'driver_peak_rss_bytes': peak_rss_bytes(),
      'driver_rss_before_rounds_bytes': rss_before_rounds,
      'worker_peak_rss_bytes': worker_rss, 'worker_processes': len(workers),
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--runtime', default='tff,tf',
                      help='comma-separated client runtimes (the first is the reference)')
  parser.add_argument('--clients', default='10,100,1000,10000',
                      help='comma-separated participating clients per round')
  parser.add_argument('--rounds', type=int, default=4,
                      help=f'rounds per size, the first {WARMUP_ROUNDS} not timed')
  parser.add_argument('--examples', type=int, default=20, help='examples per client')
  parser.add_argument('--batch-size', type=int, default=10)
  parser.add_argument('--out', default=RESULTS, help='the JSON written (default: %(default)s)')
  parser.add_argument('--no-ceiling', dest='ceiling', action='store_false',
                      help='skip the hand-written step and the bare products')
  parser.add_argument('--one', type=int, help=argparse.SUPPRESS)  # Child: one size.
  parser.add_argument('--ceiling-of', type=int, help=argparse.SUPPRESS)  # Child: ceiling.
  parser.add_argument('--clients-per-call', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.rounds <= WARMUP_ROUNDS:
    parser.error(f'--rounds: must be > {WARMUP_ROUNDS} (the first {WARMUP_ROUNDS} warm up)')
  runtimes = args.runtime.split(',')
  if args.ceiling_of:
    print(json.dumps(measure_ceiling(args.ceiling_of, args.rounds, args.examples,
                                     args.batch_size, args.clients_per_call)))
    return
  if args.one:
    print(json.dumps(measure_one(args.one, args.rounds, args.examples, args.batch_size,
                                 runtimes[0])))
    return

  sizes = [int(n) for n in args.clients.split(',')]
  load_before = os.getloadavg()
  rows, ceilings = [], []
  for size in sizes:  # Runtimes side by side at each size, under the same load.
    for runtime in runtimes:
      child = subprocess.run(
          [sys.executable, __file__, '--one', str(size), '--rounds', str(args.rounds),
           '--examples', str(args.examples), '--batch-size', str(args.batch_size),
           '--runtime', runtime], cwd=_ROOT, stdout=subprocess.PIPE, text=True, check=True)
      rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    if args.ceiling:  # The tf runtime's clients per call, where it ran.
      per_call = next((r['runtime_record'].get('clients_per_call') for r in rows
                       if r['clients'] == size and r['runtime'] == 'tf'), None)
      child = subprocess.run(
          [sys.executable, __file__, '--ceiling-of', str(size), '--rounds', str(args.rounds),
           '--examples', str(args.examples), '--batch-size', str(args.batch_size),
           '--clients-per-call', str(per_call or min(size, 1024))],
          cwd=_ROOT, stdout=subprocess.PIPE, text=True, check=True)
      ceilings.append(json.loads(child.stdout.strip().splitlines()[-1]))
  print(f'\n{"runtime":>8}{"clients":>8}{"s/round":>9}{"data s":>8}{"next s":>9}'
        f'{"clients/s":>10}{"x ref":>7}{"x linear":>9}{"driver GB":>10}{"worker GB":>10}'
        f'{"KB/client":>10}')
  for row in rows:
    base = next(r for r in rows if r['runtime'] == row['runtime'])
    reference = next(r for r in rows if r['runtime'] == runtimes[0]
                     and r['clients'] == row['clients'])
    # Time per round relative to linear growth from the smallest size (1.0: linear).
    row['vs_linear'] = (row['round_s'] / base['round_s']) / (row['clients'] / base['clients'])
    row['clients_per_s'] = row['clients'] / row['round_s']
    row['speedup_vs_reference'] = reference['round_s'] / row['round_s']
    row['total_peak_rss_bytes'] = row['driver_peak_rss_bytes'] + row['worker_peak_rss_bytes']
    row['peak_rss_bytes_per_client'] = row['total_peak_rss_bytes'] / row['clients']
    ceiling = next((c for c in ceilings if c['clients'] == row['clients']), None)
    if ceiling:
      row['fraction_of_hand_step'] = row['clients_per_s'] / ceiling['hand_step_updates_per_s']
      row['fraction_of_products'] = row['clients_per_s'] / ceiling['products_updates_per_s']
    print(f'{row["runtime"]:>8}{row["clients"]:>8}{row["round_s"]:>9.2f}'
          f'{row["datasets_s"]:>8.2f}{row["process_next_s"]:>9.2f}{row["clients_per_s"]:>10.0f}'
          f'{row["speedup_vs_reference"]:>7.1f}{row["vs_linear"]:>9.2f}'
          f'{row["driver_peak_rss_bytes"] / 1e9:>10.2f}{row["worker_peak_rss_bytes"] / 1e9:>10.2f}'
          f'{row["peak_rss_bytes_per_client"] / 1e3:>10.0f}')
  for ceiling in ceilings:
    print(f'ceiling at {ceiling["clients"]} clients: hand-written stacked step '
          f'{ceiling["hand_step_updates_per_s"]:.0f} updates/s, bare products '
          f'{ceiling["products_updates_per_s"]:.0f} updates/s '
          f'({ceiling["products_gflops_per_s"]:.1f} GFLOP/s, '
          f'{ceiling["flops_per_update"] / 1e6:.2f} MFLOP an update); ' + ', '.join(
              f'{r["runtime"]} {r["fraction_of_hand_step"]:.0%} of the hand step'
              for r in rows if r['clients'] == ceiling['clients']))
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, 'w') as f:
    json.dump({'sizes': rows, 'ceilings': ceilings, 'reference_runtime': runtimes[0],
               'model': 'mlp',
               'method': 'fedavg', 'local_epochs': 1,
               'data': 'digits drawn with replacement per client',
               'machine': {'cpus': os.cpu_count(), 'platform': platform.platform(),
                           'python': platform.python_version(),
                           'load_average_before': load_before,
                           'load_average_after': os.getloadavg()}}, f, indent=1)
  print(f'wrote {args.out}')


if __name__ == '__main__':
  main()
