"""One module per method; ``method_class`` imports the ``Method`` a registry name names."""

import importlib

from tff_noisy import methods
from tff_noisy.federated.algorithms.base import Method


def method_class(name: str) -> type:
  """The ``Method`` subclass of registry entry ``name`` (``tff_noisy.methods.METHODS``)."""
  module, _, attribute = methods.METHODS[name].algorithm.partition(':')
  return getattr(importlib.import_module(module), attribute)
