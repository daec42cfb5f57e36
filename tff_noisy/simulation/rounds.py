"""One round's training of a recipe's clients: its process's round, with the recipe's
weighting before the aggregator, or its sub-rounds one after the other
(``Schedule.groups``), and the driver's metrics of what the process measured."""

import contextlib
import gc
from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_work


class TrainedRound(NamedTuple):
  state: object  # The server state after the round.
  metrics: dict  # ``round_metrics`` (merged over sub-rounds).
  client_states: list  # In the order of the round's clients.
  diagnostics: dict  # The weighting's, or ``sub_rounds`` when there were several.
  outputs: dict  # Sums over the round's clients of what their parts sent.


def train(recipe, process, round_num: int, state, datasets: dict, client_states: list,
          faults: Optional[list], server) -> TrainedRound:
  """Trains the round's clients ``datasets`` ({client id: ClientData}) from ``state``;
  ``faults``: each client's simulated fault, in the same order, or None. Python's cyclic
  garbage collector waits until the round is trained (``collector_paused``)."""
  with collector_paused():
    return _train(recipe, process, round_num, state, datasets, client_states, faults, server)


@contextlib.contextmanager
def collector_paused():
  """Defers Python's cyclic garbage collection to the end of the block (as ``timeit``
  does), leaving it as it was before. A round allocates tens of thousands of short-lived
  objects (each client's data, results and metrics); each full collection they trigger
  rescans the half a million long-lived objects of TensorFlow and TFF, about 0.3 s on
  two cores, which came every other round at 10,000 clients a round
  (``benchmarks/scale.py``). Objects freed by their reference counts go at once, as
  ever; cycles wait for the first collection after the round."""
  was_enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if was_enabled:
      gc.enable()


def _train(recipe, process, round_num: int, state, datasets: dict, client_states: list,
           faults: Optional[list], server) -> TrainedRound:
  ids = list(datasets)
  groups = recipe.schedule.groups and recipe.schedule.groups(round_num, state, len(ids))
  if groups is None:
    weigh = recipe.weighting and recipe.weighting(round_num, state, ids, client_states,
                                                  server)
    output = process.next(state, list(datasets.values()), client_states, faults,
                          aggregation_weights=weigh)
    return TrainedRound(output.state, round_metrics(output.metrics), output.client_states,
                        dict(output.diagnostics), client_outputs(output.metrics))
  new_states = [None] * len(ids)
  records, sizes, outputs = [], [], []
  for members in groups:
    output = process.next(state, [datasets[ids[i]] for i in members],
                          [client_states[i] for i in members],
                          None if faults is None else [faults[i] for i in members])
    state = output.state
    for i, client_state in zip(members, output.client_states):
      new_states[i] = client_state
    records.append(output.metrics)
    sizes.append(len(members))
    outputs.append(client_outputs(output.metrics))
  summed = tf.nest.map_structure(lambda *v: sum(v[1:], v[0]), *outputs) if outputs else {}
  return TrainedRound(state, merged_metrics(records, sizes), new_states,
                      {'sub_rounds': len(records)}, summed)


def client_outputs(metrics) -> dict:
  """The sums over a round's clients of what their parts sent (``ClientContext.send``)."""
  return dict(metrics['client_work']['train'].get(client_work.OUTPUTS_KEY, {}))


def round_metrics(metrics) -> dict:
  """The driver's per-round metrics from a process's measurements.

  ``train_loss``/``train_accuracy`` are None when no client's update was finite (the
  round trained nothing that reached the model); so are the parts' own client-mean
  metrics (``objective``, present when a part declares ``Needs.metrics``).
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


def merged_metrics(group_metrics: list, group_sizes: list) -> dict:
  """One record for a round's sub-rounds: ``train_loss`` and ``train_accuracy`` weighted
  by the sub-rounds' examples, ``train_client_mean_accuracy`` by their clients with a
  finite update, the counts summed, the last sub-round's ``aggregator`` measurements."""
  records = [round_metrics(m) for m in group_metrics]
  examples = np.array([float(m['client_work']['train']['num_examples'])
                       for m in group_metrics])
  non_finite = np.array([r['non_finite_clients'] for r in records])
  trained = [i for i, r in enumerate(records) if r['train_loss'] is not None]

  def mean(key, weights):
    if not trained or not weights[trained].sum():
      return None
    return float(np.average([records[i][key] for i in trained], weights=weights[trained]))

  return {'train_loss': mean('train_loss', examples),
          'train_accuracy': mean('train_accuracy', examples),
          'train_client_mean_accuracy': mean('train_client_mean_accuracy',
                                             np.asarray(group_sizes) - non_finite),
          'non_finite_clients': int(non_finite.sum()),
          'update_rejected': int(sum(r['update_rejected'] for r in records)),
          'aggregator': records[-1]['aggregator']}


def _plain(value):
  """Measurements as JSON-ready Python values."""
  if isinstance(value, dict):
    return {str(k): _plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  array = np.asarray(value)
  return array.item() if array.ndim == 0 else array.tolist()
