"""What a run leaves behind: results.json, metrics.csv, TensorBoard summaries, final weights.

``results.json`` schema (documented in docs/results-schema.md):
  config           the full ExperimentConfig as a mapping
  data_hash        cache key of the federated data (same hash: byte-identical data)
  method, params   method name and its resolved parameters
  rounds           one record per round: round, seconds, wall_time, clients,
                   client_weights, skipped_empty_clients, non_finite_clients,
                   update_rejected, train_loss, train_accuracy (example-weighted),
                   train_client_mean_accuracy (each client counts once), aggregator
                   (its measurements), and on evaluated rounds test_accuracy,
                   test_macro_f1, test_class_accuracy (per class; null for a class
                   the test split lacks); train_* are null in a round where no update
                   was finite; with faults, dropped_clients and byzantine_clients (the
                   round's reporting Byzantine clients); no_reporters: true in a round
                   in which no client reported (the model did not change); diverging:
                   true in the first round whose training loss is over 100 ln C
  final_accuracy   test accuracy after the last round
  last10_accuracy  mean test accuracy of the last 10 evaluated rounds
  client_noise_rates  true per-client noise rate (simulation truth, evaluation only)
  client_flip_kinds   each client's flip kind (symmetric, pairflip, ...) beside its rate,
                   for the noise models with per-client rates (linear, mixed, choice,
                   fedcorr); empty for the others
  client_sizes     each client's number of training examples
  extra            what the method's one-off preparation recorded, its diagnostics
                   scored against the truth (tff_noisy.diagnostics); per-round
                   diagnostics sit in the round records
  device           where TensorFlow ran (tff_noisy/device.py): requested (the config's
                   auto | cpu | gpu), used (cpu | gpu), gpus (names of the GPUs used),
                   tff_worker (where TFF's worker runs: cpu in TFF 0.87)
  runtime          where the clients trained and were aggregated (tff_noisy.runtime:
                   client_runtime, clients_trained_on, path and why, aggregated_in), and
                   workers: [host:port, ...] for a run with --workers: those of the
                   last part of a resumed run
  runtime_parts    each part of the run (its start, then every --resume that trained):
                   rounds [first, last] and that part's runtime record
  byzantine_clients  the clients faults.byzantine made Byzantine (simulation truth,
                   reporting only; empty without faults and in files written before)
Undefined values (NaN, e.g. a correlation of constant estimates) are written as null, so
the file is strict JSON.
"""

import csv
import io
import dataclasses
import json
import os
from typing import Any, Dict, List, Optional

import numpy as np

from tff_noisy import files
from tff_noisy.errors import OutputError, UserError

RESULTS_FILE = 'results.json'
METRICS_FILE = 'metrics.csv'
WEIGHTS_FILE = 'final_weights.npz'
_CSV_FIELDS = ('round', 'seconds', 'clients', 'skipped_empty_clients', 'non_finite_clients',
               'update_rejected', 'train_loss', 'train_accuracy',
               'train_client_mean_accuracy', 'test_accuracy', 'test_macro_f1')


@dataclasses.dataclass
class Results:
  config: Dict[str, Any]
  data_hash: str
  method: str
  params: Dict[str, Any]
  rounds: List[Dict[str, Any]]
  client_noise_rates: Dict[str, float]
  extra: Dict[str, Any] = dataclasses.field(default_factory=dict)
  device: Dict[str, Any] = dataclasses.field(default_factory=dict)
  runtime: Dict[str, Any] = dataclasses.field(default_factory=dict)
  byzantine_clients: List[str] = dataclasses.field(default_factory=list)
  runtime_parts: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
  client_flip_kinds: Dict[str, str] = dataclasses.field(default_factory=dict)
  client_sizes: Dict[str, int] = dataclasses.field(default_factory=dict)
  # The global model's final weights (``get_weights()`` order) where the run returned them;
  # kept in final_weights.npz, not in results.json.
  final_weights: Optional[List[np.ndarray]] = dataclasses.field(
      default=None, repr=False, compare=False)

  @property
  def evaluated(self) -> List[Dict[str, Any]]:
    return [r for r in self.rounds if 'test_accuracy' in r]

  @property
  def final_accuracy(self) -> Optional[float]:
    evaluated = self.evaluated
    return evaluated[-1]['test_accuracy'] if evaluated else None

  @property
  def last10_accuracy(self) -> Optional[float]:
    evaluated = self.evaluated[-10:]
    return float(np.mean([r['test_accuracy'] for r in evaluated])) if evaluated else None

  @classmethod
  def from_dict(cls, values: Dict[str, Any]) -> 'Results':
    """The results ``load`` read (the accuracies it adds are properties here)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{key: value for key, value in values.items() if key in fields})

  def to_dict(self) -> Dict[str, Any]:
    """What results.json holds (the final weights are not in it)."""
    values = dataclasses.asdict(dataclasses.replace(self, final_weights=None))
    del values['final_weights']
    values['final_accuracy'] = self.final_accuracy
    values['last10_accuracy'] = self.last10_accuracy
    return values


def _write(path: str, content: bytes) -> None:
  """``files.write_atomically``; a failure (a full disk) is an ``OutputError`` naming the
  file, and any previous file at ``path`` is as it was."""
  try:
    files.write_atomically(path, content)
  except OSError as e:
    raise OutputError(f'could not write {path}: {e.strerror or e}; the run\'s checkpoints '
                      'are intact: make room, then finish it with --resume') from None


def write(out_dir: str, results: Results) -> None:
  """Writes results.json and metrics.csv into ``out_dir``, each atomically."""
  os.makedirs(out_dir, exist_ok=True)
  text = json.dumps(_finite_or_none(results.to_dict()), indent=1, allow_nan=False)
  rows = io.StringIO(newline='')
  writer = csv.DictWriter(rows, fieldnames=_CSV_FIELDS, extrasaction='ignore')
  writer.writeheader()
  writer.writerows(results.rounds)
  _write(os.path.join(out_dir, METRICS_FILE), rows.getvalue().encode())
  _write(os.path.join(out_dir, RESULTS_FILE), text.encode())


def _finite_or_none(value):
  """``value`` with every non-finite float (NaN, +-inf) in it replaced by None."""
  if isinstance(value, dict):
    return {key: _finite_or_none(item) for key, item in value.items()}
  if isinstance(value, (list, tuple)):
    return [_finite_or_none(item) for item in value]
  if isinstance(value, float) and not np.isfinite(value):
    return None
  return value


def load(out_dir: str) -> Dict[str, Any]:
  """A finished run's results.json; FileNotFoundError without one, UserError naming the
  file when it is not a whole results file (cut off, not JSON)."""
  path = os.path.join(out_dir, RESULTS_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f'{out_dir} has no {RESULTS_FILE}: not a finished tff-noisy run')
  try:
    with files.open_regular(path) as f:
      results = json.loads(f.read())
  except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError.
    raise UserError(f'{path} cannot be read ({e}): not a whole results file; write it again '
                    f'with `tff-noisy run CONFIG --out {out_dir} --resume`') from None
  if not isinstance(results, dict) or 'config' not in results:
    raise UserError(f'{path} is not a tff-noisy results file (no config)')
  return results


def save_final_weights(out_dir: str, weights: List[np.ndarray]) -> None:
  """Saves the global model's Keras weights (``model.get_weights()`` order)."""
  _write(os.path.join(out_dir, WEIGHTS_FILE), files.npz_bytes(*weights))


def load_final_weights(out_dir: str) -> List[np.ndarray]:
  path = os.path.join(out_dir, WEIGHTS_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(
        f'{out_dir} has no {WEIGHTS_FILE}: the run did not finish (resume it with '
        '`tff-noisy run CONFIG --out DIR --resume`)')
  with files.open_regular(path) as f, np.load(f) as arrays:
    return [arrays[f'arr_{i}'] for i in range(len(arrays.files))]
