"""Methods made of two others by value (FedDS Table 4's rows): a method's recipe with
FedDS's Dawid-Skene weighting (``recipe.combine``). Their registry entries are here, beside
neither folder, so no method folder imports another; their recipes are in
``combined_algorithm``."""

import dataclasses

from tff_noisy.methods import fedds
from tff_noisy.methods import moon
from tff_noisy.methods import scaffold
from tff_noisy.methods.common import MethodSpec


@dataclasses.dataclass(frozen=True)
class FedDSMoonParams(fedds.FedDSParams, moon.MoonParams):
  """FedDS weighting over MOON local training."""


_ALGORITHM = 'tff_noisy.methods.combined_algorithm:'
FEDDS_SCAFFOLD = MethodSpec('FedDS over SCAFFOLD local training (FedDS Table 4)',
                            fedds.FedDSParams, _ALGORITHM + 'fedds_scaffold',
                            needs_public_split=True, off_device=scaffold.OFF_DEVICE,
                            report_sections=fedds.report.SECTIONS,
                            display='SCAFFOLD + FedDS')
FEDDS_MOON = MethodSpec('FedDS over MOON local training (FedDS Table 4)', FedDSMoonParams,
                        _ALGORITHM + 'fedds_moon', needs_public_split=True,
                        off_device=moon.OFF_DEVICE, report_sections=fedds.report.SECTIONS,
                        display='MOON + FedDS')
