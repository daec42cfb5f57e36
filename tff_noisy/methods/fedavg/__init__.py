"""FedAvg (McMahan et al. 2017) and FedProx (Li et al. 2020): the baselines every other
method is measured against; cross-entropy clients, the configured aggregator."""

from tff_noisy.methods.common import MethodSpec, ProximalParams
from tff_noisy.params import Params

_ALGORITHM = 'tff_noisy.methods.fedavg.algorithm:'
SPECS = {
    'fedavg': MethodSpec('FedAvg (baseline)', Params, _ALGORITHM + 'fedavg',
                         display='FedAvg'),
    'fedprox': MethodSpec('FedProx (baseline): local proximal term', ProximalParams,
                          _ALGORITHM + 'fedprox', display='FedProx'),
}
