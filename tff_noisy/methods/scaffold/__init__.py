"""SCAFFOLD (Karimireddy et al. 2020): stochastic controlled averaging, each client's
local steps corrected by the server's and its own control variates; alone and with FedDS's
aggregation weights (FedDS Table 4). Its only settings are the run's: the client learning
rate (option II's η_l) and ``fl.server_lr`` (η_g)."""

from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.fedds import FedDSParams
from tff_noisy.methods.fedds import report as fedds_report
from tff_noisy.params import Params

_ALGORITHM = 'tff_noisy.methods.scaffold.algorithm:'
_OFF_DEVICE = ('it keeps a control variate per client and sends its change beside the '
               'update (SCAFFOLD)')
SPECS = {
    'scaffold': MethodSpec('SCAFFOLD (baseline; Karimireddy et al. 2020): control-variate '
                           'corrected local steps', Params, _ALGORITHM + 'Scaffold',
                           off_device=_OFF_DEVICE, display='SCAFFOLD'),
    'fedds_scaffold': MethodSpec('FedDS over SCAFFOLD local training (FedDS Table 4)',
                                 FedDSParams, _ALGORITHM + 'FedDSScaffold',
                                 needs_public_split=True, off_device=_OFF_DEVICE,
                                 report_sections=fedds_report.SECTIONS,
                                 display='SCAFFOLD + FedDS'),
}
