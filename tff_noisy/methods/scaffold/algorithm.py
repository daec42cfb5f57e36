"""SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II).

Clients take corrected steps and keep their control variates (the shared client part
``client_parts.ControlVariate``); the model step is the configured aggregator and server
optimiser on the clients' updates (FedAvg's: x += server_lr · the weighted mean of Δy),
then the server's control variate takes c += sum_S(Δc_i)/N
(``ops.scaffold.server_control_update``) and is broadcast with the next round's hparams.
"""

from tff_noisy.methods import contract
from tff_noisy.ops import scaffold as scaffold_ops


class ServerControlVariate(contract.ServerStep):
  """c += sum_S(Δc_i)/N after each round, from the clients' summed Δc (their outputs); N
  is the data's number of clients."""

  def after(self, round_num, state, server):
    del round_num
    process = server.process
    hparams = process.get_hparams(state)
    names = tuple(hparams)  # The control variates' (the only hparams).
    control = scaffold_ops.server_control_update(
        [hparams[n] for n in names], [server.outputs[n] for n in names],
        len(server.data.client_ids))
    return process.set_hparams(state, dict(hparams, **dict(zip(names, control)))), {}


def scaffold(params, setup) -> contract.Recipe:
  """Control-variate corrected clients; the server's c updated after each round."""
  del params
  shapes = [v.shape for v in setup.model_fn().trainable_variables]
  return contract.Recipe(
      parts=(contract.CrossEntropy(), contract.ControlVariate(shapes, setup.client_lr)),
      server=(ServerControlVariate(),))
