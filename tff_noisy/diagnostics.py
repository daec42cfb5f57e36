"""Diagnostics: what a method records about its own decisions, scored against the
simulation's truth by the driver, which knows no method.

A method's server steps (``methods.recipe.ServerStep``) return ``{key: value}``; a value
that is a :class:`Diagnostic` is replaced by what its ``scored(truth)`` returns (its own entries
plus their scores against the truth), other values go to ``results.json`` as they are.
The truth (true labels, per-client noise rates and transition matrices) never reaches a
method: only its diagnostics see it, after the method decided. TensorFlow-free.
"""

from typing import Dict, NamedTuple, Optional

import numpy as np


class Truth(NamedTuple):
  """The simulation's truth about the clients' data, which no method sees."""
  client_ids: tuple
  observed_labels: Dict[str, np.ndarray]  # The labels clients hold (noisy).
  true_labels: Dict[str, np.ndarray]
  noise_rates: Dict[str, float]  # Share of each client's labels that are wrong.
  # Each client's T[i, j] = p(observed j | true i) (``data.noise``).
  transition_matrices: Dict[str, np.ndarray]

  @classmethod
  def of(cls, data) -> Optional['Truth']:
    """The truth of ``data.federated.FederatedData``; None where it is unknown (the
    user's own data without true labels)."""
    if data.y_true is None:
      return None
    ids = tuple(data.client_ids)
    return cls(ids, data.y, data.y_true, dict(zip(ids, data.noise_rates)),
               dict(zip(ids, data.transition_matrices)))


class Diagnostic:
  """A record a method returns from a hook, scored by ``scored`` once the hook is done."""

  def scored(self, truth: Truth) -> dict:
    """The ``results.json`` entries of this record and its scores against ``truth``."""
    raise NotImplementedError

  def unscored(self) -> dict:
    """The ``results.json`` entries of this record where no truth is known: its
    estimates as they are, or nothing (the default) for a record that is only a score."""
    return {}


def score(diagnostics: dict, truth: Optional[Truth]) -> dict:
  """``diagnostics`` with each :class:`Diagnostic` replaced by its scored entries, or
  by its ``unscored`` ones where the truth is unknown (None)."""
  entries = {}
  for key, value in diagnostics.items():
    if isinstance(value, Diagnostic):
      entries.update(value.scored(truth) if truth is not None else value.unscored())
    else:
      entries[key] = value
  return entries


def correlation(estimates: Dict[str, float], truth: Dict[str, float]):
  """Pearson r of per-client ``estimates`` with ``truth`` over the estimated clients;
  None for fewer than two clients or a constant side."""
  if len(estimates) < 2:
    return None
  est = np.array(list(estimates.values()))
  true = np.array([truth[cid] for cid in estimates])
  if est.std() > 0 and true.std() > 0:
    return float(np.corrcoef(est, true)[0, 1])
  return None
