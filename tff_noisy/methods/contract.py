"""The method contract: every name a method author needs, from one public module.

A method is its parameters (``Params``, with ``described`` help and ``require`` checks),
its registry entry (``MethodSpec``, added with ``register``, whose target is its
``build(params, setup) -> Recipe``; ``Setup`` is what the config fixes for every method)
and its ``Recipe``: its client side as an ordered list of ``ClientPart`` s (the shared
ones are here too) and, where it has one, its server side (``DataPlan``, ``Schedule``, a
weighting and ``ServerStep`` s, which see their run as a ``ServerContext``; ``combine``
adds another recipe's weighting). ``docs/architecture.md`` ("How to add a method") shows one
built from these names only.

The engine's pieces a method may use are here too: the models' weights
(``model_weights_of``), probes of the received model on any clients (``build_probe``,
``probe_logits``, ``ordered_dataset``), the softmax table of a client's examples
(``example_probabilities``), the keys of the shared parts' values (``MIX_KEY``,
``MIX_SEED``; ``GLOBAL``, ``PREVIOUS``, ``HAS_PREVIOUS``), the per-example field a data
plan sets to weight a client's update by its examples (``AGGREGATION_WEIGHT_KEY``), each
client's key and each round's seed (``KeyedClients``, ``round_seed``), and the records
scored against the simulation's truth (``Diagnostic``; ``NoisyClients``, flags of noisy clients). Beside
this module a method folder imports ``tff_noisy.methods.common`` (``MethodSpec``,
without TensorFlow, for its ``__init__``), ``tff_noisy.params``, its maths in
``tff_noisy.ops`` and its own modules. Importing this module imports TensorFlow.
"""

from tff_noisy.federated.client_parts import (ClientContext, ClientPart, ControlVariate,
                                              CrossEntropy, DeviceForm,
                                              GlobalAndPreviousModels, Mixup, Needs,
                                              ON_DEVICE, Outputs, PerExampleLoss, Proximal)
from tff_noisy.diagnostics import Diagnostic
from tff_noisy.federated.client_parts import example_probabilities
from tff_noisy.federated.client_parts.mixup import MIX_KEY, MIX_SEED
from tff_noisy.federated.client_parts.reference_models import GLOBAL, HAS_PREVIOUS, PREVIOUS
from tff_noisy.federated.client_work import AGGREGATION_WEIGHT_KEY, model_weights_of
from tff_noisy.federated.probe import build_probe
from tff_noisy.federated.probe import logits_of as probe_logits
from tff_noisy.methods import register
from tff_noisy.methods.client_detection import ordered_dataset
from tff_noisy.methods.client_keys import KeyedClients, round_seed
from tff_noisy.methods.common import MethodSpec
from tff_noisy.methods.noisy_clients import NoisyClients
from tff_noisy.methods.recipe import (combine, DataPlan, Recipe, Schedule, ServerContext,
                                      ServerStep, Setup, stored_labels)
from tff_noisy.params import described, Params, require

__all__ = ['AGGREGATION_WEIGHT_KEY', 'ClientContext', 'ClientPart', 'ControlVariate', 'CrossEntropy', 'DataPlan',
           'DeviceForm', 'Diagnostic', 'GLOBAL', 'GlobalAndPreviousModels', 'HAS_PREVIOUS', 'KeyedClients',
           'MIX_KEY', 'MIX_SEED', 'MethodSpec', 'Mixup', 'Needs', 'NoisyClients',
           'ON_DEVICE', 'Outputs', 'PREVIOUS', 'Params', 'PerExampleLoss', 'Proximal',
           'Recipe', 'Schedule', 'ServerContext', 'ServerStep', 'Setup', 'build_probe',
           'combine', 'described', 'example_probabilities', 'model_weights_of',
           'ordered_dataset', 'probe_logits', 'register', 'require', 'round_seed',
           'stored_labels']
