"""Server aggregators a config can name (``fl.aggregator``), one factory per module.

Every aggregator is a weighted ``tff.aggregators`` factory for model-weights-shaped
updates, computed inside the federated computation, with a pure NumPy twin in
``tff_noisy.ops``. Each leaves out the clients whose weight is 0 (the client work zeroes a
non-finite update and gives it weight 0) and reports ``excluded_clients``. What each one
computes: ``AGGREGATOR_SUMMARIES``; its parameters: ``AGGREGATOR_PARAMS``.

This module imports no TensorFlow: config validation uses :func:`resolve_params` before
anything heavy is loaded; :func:`build_factory` imports the factory's module.
"""

import difflib
import importlib

from tff_noisy.errors import ConfigError

# name -> {parameter: default}
AGGREGATOR_PARAMS = {
    'mean': {},
    'geometric_median': {
        'max_iter': 10,  # Weiszfeld steps at most.
        'eps': 1e-5,  # Tolerance: stop once a step < eps * objective (0: never).
        'smoothing': 1e-6,  # RFA's nu: floor of every client's distance.
    },
    'geometric_median_per_tensor': {
        'max_iter': 10,  # Weiszfeld steps at most, per tensor.
        'eps': 1e-5,  # Distance floor and absolute tolerance (MaskedOptim).
    },
    'coordinate_median': {},
    'trimmed_mean': {'beta': 0.1},  # Fraction of clients trimmed at each end, in [0, 0.5).
    'krum': {'f': 1},  # Byzantine clients tolerated.
    'multi_krum': {'f': 1, 'm': 2},  # m: clients averaged, in [1, n - f].
}

# name -> one line: what the server computes.
AGGREGATOR_SUMMARIES = {
    'mean': 'Weighted mean, tff.aggregators.MeanFactory unchanged (the default)',
    'geometric_median': "RFA's smoothed Weiszfeld on the whole update, weighted "
                        '(Pillutla et al. 2022)',
    'geometric_median_per_tensor': "MaskedOptim's unweighted Weiszfeld on each weight tensor",
    'coordinate_median': 'Per-coordinate median, unweighted (Yin et al. 2018)',
    'trimmed_mean': 'Per-coordinate mean without the beta-fraction largest and smallest '
                    'values, unweighted (Yin et al. 2018)',
    'krum': 'The update with the smallest sum of squared distances to its n - f - 2 '
            'nearest others (Blanchard et al. 2017)',
    'multi_krum': 'The mean of the m best updates by the Krum score',
}

# name -> (module, factory class)
_FACTORIES = {
    'mean': ('mean', 'MeanAggregatorFactory'),
    'geometric_median': ('geometric_median', 'GeometricMedianFactory'),
    'geometric_median_per_tensor': ('geometric_median_per_tensor',
                                    'GeometricMedianPerTensorFactory'),
    'coordinate_median': ('coordinate_median', 'CoordinateMedianFactory'),
    'trimmed_mean': ('trimmed_mean', 'TrimmedMeanFactory'),
    'krum': ('krum', 'KrumFactory'),
    'multi_krum': ('krum', 'KrumFactory'),
}


def _fail(field: str, message: str):
  raise ConfigError(f'fl.aggregator_params.{field}: {message}')


def _is_int(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def resolve_params(name: str, params: dict, clients_per_round: int) -> dict:
  """Returns the aggregator's parameters with defaults filled in; raises ConfigError.

  ``clients_per_round`` is n, the clients sampled per round; Krum's limits depend on it.
  """
  if name not in AGGREGATOR_PARAMS:
    close = difflib.get_close_matches(str(name), list(AGGREGATOR_PARAMS), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ''
    raise ConfigError(f"fl.aggregator: unknown aggregator '{name}'{hint} "
                      f"Allowed: {', '.join(AGGREGATOR_PARAMS)}")
  defaults = AGGREGATOR_PARAMS[name]
  if not isinstance(params, dict):
    raise ConfigError(f'fl.aggregator_params: expected a mapping, got {params!r}')
  for key in params:
    if key not in defaults:
      close = difflib.get_close_matches(str(key), list(defaults), n=1, cutoff=0.5)
      hint = f"; did you mean '{close[0]}'?" if close else ''
      _fail(key, f"not a parameter of '{name}'{hint} Allowed: {', '.join(defaults) or 'none'}")
  resolved = dict(defaults, **params)
  if 'max_iter' in resolved:
    if not _is_int(resolved['max_iter']) or resolved['max_iter'] < 1:
      _fail('max_iter', f"needs an integer >= 1, got {resolved['max_iter']!r}")
    # RFA's eps is only a tolerance (0: every step runs); MaskedOptim's is also the floor.
    eps, is_floor = resolved['eps'], name == 'geometric_median_per_tensor'
    if not _is_number(eps) or not (eps > 0 or (eps == 0 and not is_floor)):
      _fail('eps', f"needs a number {'> 0' if is_floor else '>= 0'}, got {eps!r}")
  if 'smoothing' in resolved and (not _is_number(resolved['smoothing'])
                                  or not resolved['smoothing'] > 0):
    _fail('smoothing', f"needs a number > 0, got {resolved['smoothing']!r}")
  if 'beta' in resolved and (not _is_number(resolved['beta'])
                             or not 0 <= resolved['beta'] < 0.5):
    _fail('beta', f"needs a number in [0, 0.5), got {resolved['beta']!r}")
  if 'f' in resolved:
    f, n = resolved['f'], clients_per_round
    if not _is_int(f) or f < 0:
      _fail('f', f'needs an integer >= 0, got {f!r}')
    if n - f - 2 < 1:
      _fail('f', f'Krum needs n - f - 2 >= 1 with n = fl.clients_per_round = {n}: '
            f'f={f} needs n >= {f + 3}' + (f'; with n={n}, f can be at most {n - 3}'
                                            if n >= 3 else '; Krum needs n >= 3'))
  if 'm' in resolved:
    m, upper = resolved['m'], clients_per_round - resolved['f']
    if not _is_int(m) or not 1 <= m <= upper:
      _fail('m', f'needs an integer in [1, n - f] = [1, {upper}] '
            f'(n = fl.clients_per_round = {clients_per_round}), got {m!r}')
  return {key: float(value) if isinstance(defaults[key], float) else value
          for key, value in resolved.items()}


def build_factory(name: str, params: dict):
  """The ``tff.aggregators.WeightedAggregationFactory`` for a resolved aggregator."""
  module_name, class_name = _FACTORIES[name]
  module = importlib.import_module(f'{__name__}.{module_name}')
  return getattr(module, class_name)(**params)
