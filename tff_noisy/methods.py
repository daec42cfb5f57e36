"""The methods a config can name, with their parameters and defaults.

Kept free of TensorFlow Federated so that a config is validated before anything heavy
is imported; ``tff_noisy.federated.algorithms`` maps each name to its builder.
"""

import difflib

from tff_noisy.config import ConfigError

# name -> {parameter: default}
METHOD_PARAMS = {
    'fedavg': {},
    'fedprox': {'mu': 0.01},
}


def resolve_params(name: str, params: dict) -> dict:
  """Returns the method's parameters with defaults filled in; raises ConfigError."""
  if name not in METHOD_PARAMS:
    raise ConfigError(
        f"method.name: unknown method '{name}'; allowed: {', '.join(METHOD_PARAMS)}")
  defaults = METHOD_PARAMS[name]
  for key in params:
    if key not in defaults:
      close = difflib.get_close_matches(key, list(defaults), n=1, cutoff=0.5)
      hint = f"; did you mean '{close[0]}'?" if close else ''
      allowed = ', '.join(defaults) or 'none'
      raise ConfigError(
          f"method.params.{key}: not a parameter of '{name}'{hint} Allowed: {allowed}")
  resolved = dict(defaults, **params)
  if name == 'fedprox' and not (isinstance(resolved['mu'], (int, float))
                                and resolved['mu'] > 0):
    raise ConfigError(f"method.params.mu: FedProx needs a number > 0, got {resolved['mu']!r}")
  return resolved
