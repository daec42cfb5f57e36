"""Each client's key and each round's seed, shared by the methods whose clients draw
something of their own every round (the method contract exports both) (FedCorr's mixup pairs, DivideMix's co-divided
mixup, FedLSR's and FedRG's second views): the key is the client's place among the run's
clients, a per-example field (``MIX_KEY``) of its data; the seed comes from the run's
seed and the round."""

import numpy as np

from tff_noisy.federated.client_parts.mixup import MIX_KEY
from tff_noisy.methods.recipe import ServerStep


def round_seed(seed: int, round_num: int) -> np.int32:
  """The round's seed: a non-negative int32 drawn from (the run's seed, the round)."""
  return np.int32(np.random.SeedSequence([seed, round_num]).generate_state(1)[0] >> 1)


class KeyedClients(ServerStep):
  """A server step that gives every client its key (``extras``, for the recipe's
  ``DataPlan``) and each round its seed (``round_seed``); a subclass sets ``seed``."""

  seed: int  # The run's; the subclass sets it.
  keys: dict  # Client id -> its key, set by prepare.

  def prepare(self, server) -> dict:
    self.keys = {cid: key for key, cid in enumerate(server.data.client_ids)}
    return {}

  def extras(self, client_id, num_examples, store) -> dict:
    del store
    return {MIX_KEY: np.full(num_examples, self.keys[client_id], np.int32)}

  def round_seed(self, round_num: int) -> np.int32:
    return round_seed(self.seed, round_num)
