"""SCAFFOLD (Karimireddy et al. 2020): stochastic controlled averaging, each client's
local steps corrected by the server's and its own control variates (with FedDS's
aggregation weights: ``methods.combined``). Its only settings are the run's: the client learning
rate (option II's η_l) and ``fl.server_lr`` (η_g)."""

from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import Params

_ALGORITHM = 'tff_noisy.methods.scaffold.algorithm:'
OFF_DEVICE = ('it keeps a control variate per client and sends its change beside the '
              'update (SCAFFOLD)')
SPECS = {
    'scaffold': MethodSpec('SCAFFOLD (baseline; Karimireddy et al. 2020): control-variate '
                           'corrected local steps', Params, _ALGORITHM + 'scaffold',
                           off_device=OFF_DEVICE, display='SCAFFOLD'),
}
