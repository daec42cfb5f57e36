"""Client parts: a method's client side as an ordered list of small pieces (``base``),
which the one client kernel runs (``program``). The parts several methods share live
here, one module each; a method's own parts live in its folder."""

from tff_noisy.federated.client_parts.base import (ClientPart, DeviceForm,
                                                   example_probabilities, Needs, ON_DEVICE,
                                                   Outputs)
from tff_noisy.federated.client_parts.control_variate import ControlVariate
from tff_noisy.federated.client_parts.cross_entropy import CrossEntropy, PerExampleLoss
from tff_noisy.federated.client_parts.mixup import Mixup
from tff_noisy.federated.client_parts.program import ClientContext, ClientProgram
from tff_noisy.federated.client_parts.proximal import Proximal
from tff_noisy.federated.client_parts.reference_models import GlobalAndPreviousModels

__all__ = ['ClientContext', 'ClientPart', 'ClientProgram', 'ControlVariate', 'CrossEntropy',
           'DeviceForm', 'example_probabilities', 'GlobalAndPreviousModels', 'Mixup', 'Needs',
           'ON_DEVICE', 'Outputs', 'PerExampleLoss', 'Proximal']
