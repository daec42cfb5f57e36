"""SELFIE's record: the labels its clients refurbished, against the true labels."""

from typing import Dict

import numpy as np

from tff_noisy import diagnostics
from tff_noisy.ops import selfie


class Refurbishment(diagnostics.Diagnostic):
  """``{client id: refurbished labels [n]}`` (-1: not refurbished) of the clients that have
  trained: ``refurbishment`` (``ops.selfie.refurbish_report`` over all their examples:
  how many are refurbished, the share refurbished to the true label, the share of flipped
  labels refurbished to the true one)."""

  def __init__(self, refurbished: Dict[str, np.ndarray]):
    self.refurbished = refurbished

  def unscored(self):
    if not self.refurbished:
      return {}
    done = sum(int((r != selfie.NOT_REFURBISHED).sum()) for r in self.refurbished.values())
    return {'refurbishment': {'clients': len(self.refurbished), 'refurbished': done}}

  def scored(self, truth):
    if not self.refurbished:
      return {}
    ids = list(self.refurbished)
    report = selfie.refurbish_report(
        np.concatenate([self.refurbished[c] for c in ids]),
        np.concatenate([truth.true_labels[c] for c in ids]),
        np.concatenate([truth.observed_labels[c] for c in ids]))
    return {'refurbishment': {'clients': len(ids), **report}}
