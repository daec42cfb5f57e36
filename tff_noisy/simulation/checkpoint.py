"""Verified checkpoints of a run: server state, client state store, round and history.

A checkpoint is a directory ``round_NNNNN`` written under a private temporary name and
renamed into place, so it appears whole or not at all; the last two are kept. Its
``meta.json`` holds the round, the history, the SHA-256 of each array file and the run's
identity (:func:`identity_of`). :func:`load` refuses a checkpoint of another run, and
passes over a corrupt newest checkpoint (with a warning) to the one before it.

The server state is flattened with ``tf.nest`` and restored into the structure of a
freshly initialised state, so a checkpoint needs no pickling. Checkpoints written before
the state had its ``controller`` slot (FedEFC's prestopping monitor rode in the hparams,
right after them) are read back in today's order. Randomness needs no
saved state: every round's client sample and data order derive from (seed, round).
"""

import hashlib
import json
import os
import re
import shutil
import stat
import zipfile
from typing import Any, List, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tff_noisy import config as config_lib
from tff_noisy import files
from tff_noisy.config import ExperimentConfig
from tff_noisy.errors import OutputError, UserError, warn
from tff_noisy.simulation.client_state import ClientStateStore

_STATE = 'state.npz'
_CLIENTS = 'client_state.npz'
_META = 'meta.json'
_NAME = re.compile(r'round_(\d+)')
_KEEP = 2
# Fields a resumed run may change: its length and reporting, where its data is read and
# cached (the data itself is fixed by data_hash), the device it runs on (a CPU run may
# continue on a GPU machine and back) and how the tf runtime groups clients (equal results
# to float rounding), and the modules imported for the user's own methods (``imports``:
# where their code is found; the method's name and resolved parameters stay fixed).
_MAY_CHANGE = ('fl.rounds', 'fl.eval_every', 'fl.checkpoint_every', 'data.data_dir',
               'data.cache_dir', 'device', 'fl.clients_per_call', 'fl.stack_clients',
               'imports')
_SHOWN_DIFFERENCES = 5
_RESOLVED = 'method.resolved.'  # An identity's resolved method parameters (identity_of).
_PARAMS = 'method.params.'  # The config's, as written.
# meta.json's name for how the server state is laid out; absent: the controller's values
# (if any) follow the hparams, as before ``process.ServerState.controller`` existed.
_LAYOUT = 'state_layout'
_CONTROLLER_LAST = 'controller_last'

_START_FRESH = 'start fresh with --overwrite or a new --out'


class CheckpointError(UserError):
  """No checkpoint can continue this run."""


class Checkpoint(NamedTuple):
  round_num: int
  state: Any
  store: ClientStateStore
  history: list
  # Where each part of the run so far ran (results.json ``runtime_parts``); [] for
  # checkpoints written before parts were kept.
  runtime_parts: list = []


class _Unusable(Exception):
  """A checkpoint directory that cannot be read back; the message says why."""


def identity_of(config: ExperimentConfig, weight_shapes, data_hash: Optional[str] = None,
                method_params: Optional[dict] = None) -> dict:
  """What a checkpoint belongs to: ``{dotted config field: value}`` plus data and model.

  Every config field but those in ``_MAY_CHANGE`` (so seed and method.name too) and
  later additions at their defaults (``config.ADDED_FIELDS``), the
  federated data's ``data_hash``, the model's ``weight_shapes`` and, as
  ``method.resolved.NAME``, every ``method_params`` value, defaults included (a default
  changed since the checkpoint is another run; the caller leaves out a parameter added
  since, at the value its absence means: ``Params.identifying``), as JSON reads them back.
  The client runtime must be resolved (``config.resolve_client_runtime``): the identity
  names where the run's clients trained.
  """
  if config.fl.client_runtime == config_lib.AUTO_RUNTIME:
    raise ValueError('identity_of: resolve fl.client_runtime: auto first')
  identity = {name: value for name, value in _flatten(config.to_dict()).items()
              if name not in _MAY_CHANGE and not config_lib.is_unset_addition(name, value)}
  identity['data_hash'] = data_hash or config.data_hash()
  identity['weight_shapes'] = [[int(d) for d in shape] for shape in weight_shapes]
  identity.update({_RESOLVED + name: value for name, value in (method_params or {}).items()})
  return json.loads(json.dumps(identity))


def save(directory: str, round_num: int, state: Any, store: ClientStateStore,
         history: list, identity: dict, runtime_parts: Optional[list] = None) -> None:
  """Writes ``directory/round_NNNNN``; keeps it and the newest checkpoint before it.

  ``runtime_parts``: where each part of the run (a start, then each ``--resume``) ran.

  Checkpoints of later rounds (left behind when :func:`load` fell back past a corrupt
  one) are removed. A crash at any moment leaves the previous checkpoints intact.
  """
  os.makedirs(directory, exist_ok=True)
  final = os.path.join(directory, f'round_{round_num:05d}')
  tmp = files.make_temporary_dir(f'.{os.path.basename(final)}.', directory)
  try:
    flat = tf.nest.flatten(state)
    _write_npz(os.path.join(tmp, _STATE),
               {f'{i:05d}': np.asarray(v) for i, v in enumerate(flat)})
    _write_npz(os.path.join(tmp, _CLIENTS), store.to_arrays())
    meta = {'round': round_num, 'history': history, 'identity': identity,
            _LAYOUT: _CONTROLLER_LAST, 'runtime_parts': runtime_parts or [],
            'sha256': {name: _sha256(os.path.join(tmp, name)) for name in (_STATE, _CLIENTS)}}
    with open(os.path.join(tmp, _META), 'w') as f:
      json.dump(meta, f)
      f.flush()
      os.fsync(f.fileno())
    shutil.rmtree(final, ignore_errors=True)  # A stale checkpoint of this round.
    os.replace(tmp, final)
  except BaseException as e:
    shutil.rmtree(tmp, ignore_errors=True)
    if isinstance(e, OSError):
      earlier = [r for r, _ in _checkpoints(directory) if r < round_num]
      kept = (f'the checkpoint of round {earlier[0]} is intact: make room, then continue '
              'with --resume' if earlier else 'no earlier checkpoint exists')
      raise OutputError(f'could not write the checkpoint of round {round_num} in '
                        f'{directory}: {e.strerror or e}; {kept}') from None
    raise
  older = [r for r, _ in _checkpoints(directory) if r < round_num]
  keep = {round_num, *older[:_KEEP - 1]}
  for r, path in _checkpoints(directory):
    if r not in keep:
      shutil.rmtree(path, ignore_errors=True)


def load(directory: str, state_template: Any, identity: dict,
         rounds: int) -> Optional[Checkpoint]:
  """The newest usable checkpoint in ``directory``, or None when it holds none.

  Args:
    directory: where :func:`save` wrote.
    state_template: a freshly initialised server state; gives the structure and shapes.
    identity: this run's :func:`identity_of`.
    rounds: this run's ``fl.rounds``; a run may be extended on resume, not shortened.

  Raises:
    CheckpointError: no checkpoint is usable, or the newest usable one belongs to
      another run (the message names each differing field), is past round ``rounds``
      or holds a server state of other shapes than ``state_template``.
  """
  unusable = []
  for _, path in _checkpoints(directory):
    try:
      meta, flat, client_arrays = _read(path)
    except _Unusable as e:
      unusable.append(f'{path} ({e})')
      continue
    for reason in unusable:
      warn(f'checkpoint {reason} is unusable; resuming from {path}')
    if meta.get(_LAYOUT) != _CONTROLLER_LAST:
      flat = _controller_last(flat, state_template)
    _check(path, meta, identity, rounds, flat, tf.nest.flatten(state_template))
    return Checkpoint(meta['round'], tf.nest.pack_sequence_as(state_template, flat),
                      ClientStateStore.from_arrays(client_arrays), meta['history'],
                      meta.get('runtime_parts', []))
  if unusable:
    raise CheckpointError(f'no usable checkpoint in {directory}: {"; ".join(unusable)}; '
                          f'{_START_FRESH}')
  return None


def _controller_last(flat: list, state_template: Any) -> list:
  """A state saved before the ``controller`` slot, in today's order: the controller's
  values then followed the hparams (``client_work``); now they come last."""
  controller = getattr(state_template, 'controller', None)
  moved = len(tf.nest.flatten(controller)) if controller else 0
  if not moved:
    return flat
  end = len(tf.nest.flatten(state_template[:3]))  # Weights, distributor, hparams.
  return flat[:end] + flat[end + moved:] + flat[end:end + moved]


def _flatten(values: dict, prefix: str = '') -> dict:
  """Nested mappings as ``{'a.b': value}``; an empty mapping adds nothing."""
  flat = {}
  for key, value in values.items():
    if isinstance(value, dict):
      flat.update(_flatten(value, f'{prefix}{key}.'))
    else:
      flat[f'{prefix}{key}'] = value
  return flat


def _differences(saved: dict, current: dict) -> List[str]:
  """``'field: checkpoint X, this run Y'`` for each field in which two identities differ
  (a field an identity leaves out has the value its absence means, ``ADDED_FIELDS``).
  The method's parameters are compared resolved, not as the configs wrote them; a
  checkpoint written before identities held the resolved ones, as written."""
  def value(identity, name):
    return identity.get(name, config_lib.ADDED_FIELDS.get(name))

  names = set(saved) | set(current)
  # Resolved, a default stated in one config and left out of the other is the same run.
  left_out = _PARAMS if any(name.startswith(_RESOLVED) for name in saved) else _RESOLVED
  names = {name for name in names if not name.startswith(left_out)}
  return [f'{name}: checkpoint {json.dumps(value(saved, name))}, '
          f'this run {json.dumps(value(current, name))}'
          for name in sorted(names) if value(saved, name) != value(current, name)]


def _check(path: str, meta: dict, identity: dict, rounds: int, flat: list,
           template: list) -> None:
  """Raises CheckpointError unless the checkpoint can continue this run."""
  differences = _differences(meta['identity'], identity)
  if differences:
    more = len(differences) - _SHOWN_DIFFERENCES
    shown = '; '.join(differences[:_SHOWN_DIFFERENCES]) + (f'; {more} more' if more > 0 else '')
    raise CheckpointError(f'{path} belongs to another run ({shown}); {_START_FRESH}')
  if meta['round'] > rounds:
    raise CheckpointError(
        f'{path} is at round {meta["round"]}, past fl.rounds={rounds}: a run cannot be '
        f'shortened; set fl.rounds >= {meta["round"]}, or {_START_FRESH}')
  if len(flat) != len(template):
    raise CheckpointError(
        f'{path} has {len(flat)} state tensors but this config builds {len(template)}: '
        f'it was written by a different model or method; {_START_FRESH}')
  for i, (saved, built) in enumerate(zip(flat, template)):
    if saved.shape != np.shape(built):
      raise CheckpointError(
          f'{path}: state tensor {i} has shape {saved.shape} but this config builds '
          f'{np.shape(built)}: it was written by a different model or method; '
          f'{_START_FRESH}')


def _checkpoints(directory: str) -> list:
  """``(round, path)`` of the checkpoint directories in ``directory``, newest first."""
  try:
    names = os.listdir(directory)
  except FileNotFoundError:
    return []
  found = [(int(m.group(1)), os.path.join(directory, name))
           for name in names for m in [_NAME.fullmatch(name)] if m]
  return sorted(found, reverse=True)


def _read(path: str) -> tuple:
  """``(meta, state arrays, client arrays)``; raises _Unusable saying what is wrong."""
  try:
    with _open_file(os.path.join(path, _META)) as f:
      meta = json.loads(f.read())
    missing = [key for key in ('round', 'history', 'identity', 'sha256') if key not in meta]
    if missing:
      raise _Unusable(f'{_META} lacks {", ".join(missing)}')
    for name in (_STATE, _CLIENTS):
      if _sha256(os.path.join(path, name)) != meta['sha256'].get(name):
        raise _Unusable(f'{name} does not match its checksum')
    with _open_file(os.path.join(path, _STATE)) as f, np.load(f) as arrays:
      flat = [arrays[k] for k in sorted(arrays.files)]
    with _open_file(os.path.join(path, _CLIENTS)) as f, np.load(f) as arrays:
      client_arrays = {k: arrays[k] for k in arrays.files}
  except OSError as e:
    raise _Unusable(f'{os.path.basename(e.filename or path)}: {e.strerror}') from None
  except (ValueError, TypeError, AttributeError, zipfile.BadZipFile) as e:
    raise _Unusable(f'cannot be read: {e}') from None
  return meta, flat, client_arrays


def _open_file(path: str):
  """``path`` opened for reading in binary; _Unusable for anything but a regular file (a
  FIFO or a device, also behind a symlink, would block the read or never end)."""
  fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # A FIFO's open waits for no writer.
  if not stat.S_ISREG(os.fstat(fd).st_mode):
    os.close(fd)
    raise _Unusable(f'{os.path.basename(path)} is not a regular file')
  return os.fdopen(fd, 'rb')


def _write_npz(path: str, arrays: dict) -> None:
  with open(path, 'wb') as f:
    f.write(files.npz_bytes(**arrays))  # Built in memory: a full disk fails this write.
    f.flush()
    os.fsync(f.fileno())


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with _open_file(path) as f:
    for block in iter(lambda: f.read(1 << 20), b''):
      digest.update(block)
  return digest.hexdigest()
