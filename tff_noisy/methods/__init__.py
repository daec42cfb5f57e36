"""The method registry: every method a config can name, its typed parameters, its code.

A method is one folder, ``methods/<name>/``: its ``__init__`` (TensorFlow-free) holds its
parameter classes and ``SPECS``, its registry entries (``common.MethodSpec``); beside it
its ``algorithm`` (its entry's target: ``build(params, setup)``, which returns its
``recipe.Recipe``), its ``parts`` when it has client parts of its own, its
``diagnostics`` (records that score themselves against the simulation truth,
``tff_noisy.diagnostics``) and its ``report`` (their sections of ``tff-noisy report``).
Adding a method is a folder and one line below; ``combined`` holds the methods made of
two others. No method folder imports another.

Importing this package imports no TensorFlow, so a config is validated before anything
heavy; ``METHODS[name].resolve()`` imports the algorithm a name points to. A method of
another package is added by ``register``, from a module that a config's ``imports``,
``--import`` or an installed entry point (group ``tff_noisy.methods``, imported when the
registry is first used) names (``tff_noisy.extensions``).
"""

import dataclasses

from tff_noisy import extensions
from tff_noisy import registry
from tff_noisy.errors import ConfigError
from tff_noisy.methods import combined
from tff_noisy.methods import confident_learning
from tff_noisy.methods import coteaching
from tff_noisy.methods import coteaching_plus
from tff_noisy.methods import ditto
from tff_noisy.methods import dividemix
from tff_noisy.methods import elr
from tff_noisy.methods import fedavg
from tff_noisy.methods import fedcorr
from tff_noisy.methods import feddiv
from tff_noisy.methods import feddyn
from tff_noisy.methods import fedds
from tff_noisy.methods import fedefc
from tff_noisy.methods import fedelc
from tff_noisy.methods import fedexp
from tff_noisy.methods import fedln
from tff_noisy.methods import fedln_akd
from tff_noisy.methods import fedlsr
from tff_noisy.methods import fedrg
from tff_noisy.methods import fednoro
from tff_noisy.methods import fedrn
from tff_noisy.methods import focus
from tff_noisy.methods import joint_optim
from tff_noisy.methods import logitclip
from tff_noisy.methods import lsc
from tff_noisy.methods import maskedoptim
from tff_noisy.methods import moon
from tff_noisy.methods import rfl
from tff_noisy.methods import robust_losses
from tff_noisy.methods import scaffold
from tff_noisy.methods import selfie
from tff_noisy.methods.common import MethodSpec, display_name
from tff_noisy.params import Params

# The registry: one line per method folder, in the order `tff-noisy list` shows them.
METHODS = registry.Registry('method.name', 'method', {
    **fedavg.SPECS,
    **robust_losses.SPECS,
    **logitclip.SPECS,
    **confident_learning.SPECS,
    **fedln.SPECS,
    **fedln_akd.SPECS,
    **fedds.SPECS,
    **scaffold.SPECS,
    'fedds_scaffold': combined.FEDDS_SCAFFOLD,
    **moon.SPECS,
    'fedds_moon': combined.FEDDS_MOON,
    **focus.SPECS,
    **feddyn.SPECS,
    **ditto.SPECS,
    **fedexp.SPECS,
    **coteaching.SPECS,
    **coteaching_plus.SPECS,
    **selfie.SPECS,
    **dividemix.SPECS,
    **fedrn.SPECS,
    **joint_optim.SPECS,
    **elr.SPECS,
    **lsc.SPECS,
    **fedefc.SPECS,
    **maskedoptim.SPECS,
    **fednoro.SPECS,
    **fedelc.SPECS,
    **rfl.SPECS,
    **fedlsr.SPECS,
    **fedcorr.SPECS,
    **feddiv.SPECS,
    **fedrg.SPECS,
}, MethodSpec, discover=extensions.import_entry_points, unknown_hint=extensions.IMPORTS_HINT)


def register(specs: dict) -> None:
  """Adds ``{name: MethodSpec}`` to the registry (a method outside this package)."""
  for name, spec in specs.items():
    METHODS.register(name, spec)


def report_sections() -> list:
  """Every registered method's report sections, each once, in registry order."""
  sections = []
  for spec in METHODS.values():
    sections += [s for s in spec.report_sections if s not in sections]
  return sections


def device_support() -> str:
  """What trains on devices (``fl.client_runtime: tflite``), for error messages."""
  names = [name for name, spec in METHODS.items() if not spec.off_device]
  return f'supported on devices: methods {", ".join(names)}'


def param_names(name: str) -> tuple:
  """The parameter names method ``name`` takes."""
  return tuple(f.name for f in dataclasses.fields(METHODS[name].params))


def param_owners(key: str) -> list:
  """The methods that take a parameter named ``key``."""
  return [name for name in METHODS if key in param_names(name)]


def resolve_params(name: str, params: dict, rounds: int) -> Params:
  """Method ``name``'s parameters with defaults filled in; raises ConfigError.

  ``rounds`` (fl.rounds) bounds round-valued parameters such as FedLN's R_c.
  """
  spec = METHODS.lookup(name)

  def belongs(key):
    owners = param_owners(key)
    return f" (it belongs to {', '.join(owners)})" if owners else ''

  return spec.params.from_mapping(params, rounds, name, belongs)


def validate(config, custom_data=None) -> Params:
  """Checks the config's method against its parameters and data; returns the params.

  ``custom_data``: the user's own federated data (``data.dataset: custom``)."""
  params = resolve_params(config.method.name, config.method.params, config.fl.rounds)
  spec = METHODS[config.method.name]
  if spec.needs_public_split and custom_data is not None:
    if custom_data.x_public is None or not len(custom_data.x_public):
      raise ConfigError(f"data: method '{config.method.name}' needs a public set on the "
                        'server; pass public_x to tff_noisy.federated_data')
    if spec.needs_public_labels and custom_data.y_public is None:
      raise ConfigError(f"data: method '{config.method.name}' needs the public set's clean "
                        'labels on the server; pass public_y to tff_noisy.federated_data')
  elif spec.needs_public_split and config.data.public_fraction <= 0:
    raise ConfigError(f"data.public_fraction: method '{config.method.name}' needs a public "
                      'split on the server; set it in (0, 1), e.g. 0.1 as in FedDS\'s paper')
  off_device = spec.off_device
  if config.fl.client_runtime == 'tflite' and off_device:
    raise ConfigError(f"fl.client_runtime: tflite, but method '{config.method.name}' "
                      f'cannot train on devices: {off_device}; {device_support()}')
  return params
