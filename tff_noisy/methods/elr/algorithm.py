"""ELR (Liu et al. 2020) uplifted to FL: every client trains on the cross-entropy plus
ELR's regulariser against its own per-example targets (``parts``, client state persisted
and checkpointed); the server is FedAvg's (the configured aggregator). A client's targets
move only at its own steps, so a client that a round does not sample keeps them."""

from tff_noisy.methods import contract
from tff_noisy.methods.elr.parts import ELRTerm


def elr(params, setup) -> contract.Recipe:
  return contract.Recipe(parts=(contract.CrossEntropy(),
                                ELRTerm(setup.num_classes, params.beta, params.lambda_elr)))
