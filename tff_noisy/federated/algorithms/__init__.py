"""One builder per method; ``METHODS`` maps a config's method name to its ``Method``."""

from tff_noisy.federated.algorithms.base import Method
from tff_noisy.federated.algorithms.fedavg import FedAvg
from tff_noisy.federated.algorithms.fedds import FedDS
from tff_noisy.federated.algorithms.fedln import FedLN
from tff_noisy.federated.algorithms.fedln import FedLNNAFedAvg
from tff_noisy.federated.algorithms.fedln import FedLNNNC
from tff_noisy.federated.algorithms.fedprox import FedProx

METHODS = {
    'fedavg': FedAvg,
    'fedprox': FedProx,
    'fedln': FedLN,
    'fedln_nnc': FedLNNNC,
    'fedln_nafedavg': FedLNNAFedAvg,
    'fedds': FedDS,
    'fedds_fedprox': FedDS,
}
