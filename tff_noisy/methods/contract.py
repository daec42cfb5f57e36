"""The method contract: every name a method author needs, from one public module.

A method is its parameters (``Params``, with ``described`` help and ``require`` checks),
its registry entry (``MethodSpec``, added with ``register``), its client side as an
ordered list of ``ClientPart`` s (the shared ones are here too) and, where it has one,
its server side as a ``Method`` subclass (the driver's hooks; ``Setup`` is what the config
fixes for every method). ``docs/architecture.md`` ("How to add a method") shows one
built from these names only. Importing this module imports TensorFlow.
"""

from tff_noisy.federated.client_parts import (ClientContext, ClientPart, ControlVariate,
                                              CrossEntropy, DeviceForm,
                                              GlobalAndPreviousModels, Mixup, Needs,
                                              ON_DEVICE, Outputs, PerExampleLoss, Proximal)
from tff_noisy.methods import register
from tff_noisy.methods.base import Method, Setup
from tff_noisy.methods.common import MethodSpec
from tff_noisy.params import described, Params, require

__all__ = ['ClientContext', 'ClientPart', 'ControlVariate', 'CrossEntropy', 'DeviceForm',
           'GlobalAndPreviousModels', 'Method', 'MethodSpec', 'Mixup', 'Needs', 'ON_DEVICE',
           'Outputs', 'Params', 'PerExampleLoss', 'Proximal', 'Setup', 'described',
           'register', 'require']
