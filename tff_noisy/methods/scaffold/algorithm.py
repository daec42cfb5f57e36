"""SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II) and SCAFFOLD under FedDS's
aggregation weights (FedDS Table 4's "SCAFFOLD + FedDS").

Clients take corrected steps and keep their control variates (the shared client part
``client_parts.ControlVariate``); the model
step is the configured aggregator and server optimiser on the clients' updates (FedAvg's:
x += server_lr · the weighted mean of Δy), then the server's control variate takes
c += sum_S(Δc_i)/N (``ops.scaffold.server_control_update``) and is broadcast with the
next round's hparams.
"""

from tff_noisy.methods import base
from tff_noisy.methods.fedds.algorithm import FedDS
from tff_noisy.federated.client_parts import ControlVariate, CrossEntropy
from tff_noisy.ops import scaffold


class Scaffold(base.Method):
  """Control-variate corrected clients; the server's c updated after each round."""

  def __init__(self, process, params, setup):
    super().__init__(process, params, setup)
    self.num_clients = None  # N, from the data (``prepare``).

  @classmethod
  def client_parts(cls, params, setup):
    del params
    shapes = [v.shape for v in setup.model_fn().trainable_variables]
    return [CrossEntropy(), ControlVariate(shapes, setup.client_lr)]

  def prepare(self, data, store) -> dict:
    extra = super().prepare(data, store)
    self.num_clients = len(data.client_ids)
    return extra

  def server_update(self, state, outputs):
    hparams = self.process.get_hparams(state)
    names = tuple(hparams)  # The control variates' (the only hparams).
    control = scaffold.server_control_update(
        [hparams[n] for n in names], [outputs[n] for n in names], self.num_clients)
    return self.process.set_hparams(state, dict(hparams, **dict(zip(names, control))))


class FedDSScaffold(Scaffold, FedDS):
  """SCAFFOLD's clients and control variates, FedDS's Dawid-Skene aggregation weights."""
