"""Atomic checkpoints of a run: server state, client state store, round and history.

The server state is flattened with ``tf.nest`` and restored into the structure of a
freshly initialised state, so a checkpoint needs no pickling. Randomness needs no
saved state: every round's client sample and data order derive from (seed, round).
"""

import json
import os
import shutil
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from tff_noisy.simulation.client_state import ClientStateStore

_STATE = 'state.npz'
_CLIENTS = 'client_state.npz'
_META = 'meta.json'
_LATEST = 'LATEST'


def save(directory: str, round_num: int, state: Any, store: ClientStateStore,
         history: list) -> None:
  """Writes ``directory/round_NNNNN`` and then points ``LATEST`` at it.

  A crash at any moment leaves ``LATEST`` naming a complete checkpoint.
  """
  name = f'round_{round_num:05d}'
  tmp = os.path.join(directory, name + '.tmp')
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  flat = tf.nest.flatten(state)
  np.savez(os.path.join(tmp, _STATE), **{f'{i:05d}': np.asarray(v) for i, v in enumerate(flat)})
  np.savez(os.path.join(tmp, _CLIENTS), **store.to_arrays())
  with open(os.path.join(tmp, _META), 'w') as f:
    json.dump({'round': round_num, 'history': history}, f)
  shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
  os.replace(tmp, os.path.join(directory, name))
  with open(os.path.join(directory, _LATEST + '.tmp'), 'w') as f:
    f.write(name)
  os.replace(os.path.join(directory, _LATEST + '.tmp'), os.path.join(directory, _LATEST))
  for old in os.listdir(directory):
    if old.startswith('round_') and old != name:
      shutil.rmtree(os.path.join(directory, old), ignore_errors=True)


def latest(directory: str) -> Optional[str]:
  """Path of the newest complete checkpoint in ``directory``, or None."""
  try:
    with open(os.path.join(directory, _LATEST)) as f:
      return os.path.join(directory, f.read().strip())
  except FileNotFoundError:
    return None


def load(directory: str, state_template: Any) -> Optional[tuple]:
  """Returns ``(round, state, store, history)`` or None when there is no checkpoint."""
  path = latest(directory)
  if path is None:
    return None
  with open(os.path.join(path, _META)) as f:
    meta = json.load(f)
  with np.load(os.path.join(path, _STATE)) as arrays:
    flat = [arrays[k] for k in sorted(arrays.files)]
  template_flat = tf.nest.flatten(state_template)
  if len(flat) != len(template_flat):
    raise ValueError(
        f'checkpoint {path} has {len(flat)} state tensors but this config builds '
        f'{len(template_flat)}: it was written by a different model or method')
  state = tf.nest.pack_sequence_as(state_template, flat)
  with np.load(os.path.join(path, _CLIENTS)) as arrays:
    store = ClientStateStore.from_arrays({k: arrays[k] for k in arrays.files})
  return meta['round'], state, store, meta['history']
