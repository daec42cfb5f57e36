"""Per-client state that outlives a round: TFF clients are stateless, the driver is not.

Keyed by client id, two kinds of value:

- *learned* state (noise estimates, flags, a client objective's state such as
  per-sample label logits): it cannot be recomputed, so every checkpoint saves it;
- *derived* data that a method's ``prepare`` recomputes deterministically from the data
  and the config (NNC's corrected labels, encoder embeddings): never checkpointed, so
  a checkpoint does not grow with the data set, and recomputed on resume.

The client parts' state (``ClientPart.state_spec``) is kept under its own names
and checked against the declared shapes and dtypes every time it is handed out.
"""

import collections
from typing import Any, Dict

import numpy as np
import tensorflow as tf

_OBJECTIVE = 'objective.'


class ClientStateError(ValueError):
  """A stored client state does not match what the objective declares."""


class ClientStateStore:
  """A mapping ``client_id -> {name: value}`` of NumPy arrays and plain scalars."""

  def __init__(self):
    self._learned: Dict[str, Dict[str, Any]] = {}
    self._derived: Dict[str, Dict[str, Any]] = {}

  def copy(self) -> 'ClientStateStore':
    """A store holding the same values; setting a value in either leaves the other as
    it was (values are replaced, never changed in place)."""
    copied = ClientStateStore()
    copied._learned = {cid: dict(values) for cid, values in self._learned.items()}
    copied._derived = {cid: dict(values) for cid, values in self._derived.items()}
    return copied

  def get(self, client_id: str, name: str, default: Any = None) -> Any:
    for values in (self._learned, self._derived):
      if name in values.get(client_id, {}):
        return values[client_id][name]
    return default

  def set(self, client_id: str, name: str, value: Any) -> None:
    """Stores learned state (checkpointed)."""
    self._learned.setdefault(client_id, {})[name] = value

  def set_derived(self, client_id: str, name: str, value: Any) -> None:
    """Stores data that ``prepare`` recomputes (not checkpointed)."""
    self._derived.setdefault(client_id, {})[name] = value

  def objective_state(self, client_id: str, objective, labels: np.ndarray):
    """The client's objective state: stored, or the objective's initial state."""
    spec = objective.state_spec
    if not spec:
      return ()
    stored = {name: self.get(client_id, _OBJECTIVE + name) for name in spec}
    if any(value is None for value in stored.values()):
      stored = objective.initial_state(labels)
    return check_state(spec, stored, client_id)

  def set_objective_state(self, client_id: str, state) -> None:
    for name, value in (state or {}).items():
      self.set(client_id, _OBJECTIVE + name, np.asarray(value))

  def to_arrays(self) -> Dict[str, np.ndarray]:
    """Flattens the learned state to ``{'client/name': array}`` (for ``np.savez``)."""
    return {f'{cid}/{name}': np.asarray(value)
            for cid, values in self._learned.items() for name, value in values.items()}

  @classmethod
  def from_arrays(cls, arrays) -> 'ClientStateStore':
    store = cls()
    for key in arrays:
      cid, name = key.split('/', 1)
      value = np.asarray(arrays[key])
      keep_array = value.ndim > 0 or name.startswith(_OBJECTIVE)  # Dtypes are declared.
      store.set(cid, name, value if keep_array else value.item())
    return store


def check_state(spec: dict, state: dict, client_id: str) -> collections.OrderedDict:
  """``state`` ordered as ``spec``; raises ClientStateError on a missing or misshapen part."""
  if set(state) != set(spec):
    raise ClientStateError(
        f'client {client_id}: state has {sorted(state)} but the objective declares '
        f'{sorted(spec)}')
  checked = collections.OrderedDict()
  for name, tensor_spec in spec.items():
    value = np.asarray(state[name])
    if not tf.TensorShape(tensor_spec.shape).is_compatible_with(value.shape):
      raise ClientStateError(
          f"client {client_id}: state '{name}' has shape {value.shape} but the objective "
          f'declares {tuple(tensor_spec.shape.as_list())} (None: any size)')
    if value.dtype != tensor_spec.dtype.as_numpy_dtype:
      raise ClientStateError(
          f"client {client_id}: state '{name}' has dtype {value.dtype} but the objective "
          f'declares {tensor_spec.dtype.name}')
    checked[name] = value
  return checked
