"""Per-client state that outlives a round: TFF clients are stateless, the driver is not.

Methods keep corrected labels, noise estimates, transition matrices and flags here,
keyed by client id; the store is saved with every checkpoint.
"""

from typing import Any, Dict

import numpy as np


class ClientStateStore:
  """A mapping ``client_id -> {name: value}`` of NumPy arrays and plain scalars."""

  def __init__(self):
    self._state: Dict[str, Dict[str, Any]] = {}

  def get(self, client_id: str, name: str, default: Any = None) -> Any:
    return self._state.get(client_id, {}).get(name, default)

  def set(self, client_id: str, name: str, value: Any) -> None:
    self._state.setdefault(client_id, {})[name] = value

  def to_arrays(self) -> Dict[str, np.ndarray]:
    """Flattens the store to ``{'client/name': array}`` (for ``np.savez``)."""
    return {f'{cid}/{name}': np.asarray(value)
            for cid, values in self._state.items() for name, value in values.items()}

  @classmethod
  def from_arrays(cls, arrays) -> 'ClientStateStore':
    store = cls()
    for key in arrays:
      cid, name = key.split('/', 1)
      value = np.asarray(arrays[key])
      store.set(cid, name, value.item() if value.ndim == 0 else value)
    return store
