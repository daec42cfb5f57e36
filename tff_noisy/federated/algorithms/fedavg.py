"""FedAvg (McMahan et al. 2017): cross-entropy clients, the configured aggregator."""

from tff_noisy.federated.algorithms import base


class FedAvg(base.Method):
  """The default ``Method``: nothing to add."""
