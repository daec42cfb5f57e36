"""The methods a config can name, with their parameters and defaults.

Kept free of TensorFlow Federated so that a config is validated before anything heavy
is imported; ``tff_noisy.federated.algorithms`` maps each name to its builder.
"""

import difflib

from tff_noisy.config import ConfigError

_NNC = {
    'k': 100,  # Neighbours in the vote, the sample itself included (clipped to the client).
    'encoder': 'pca',  # 'pca' (label-free, offline) or a TF-Hub handle / SavedModel dir.
    'pca_components': 50,
    'pca_sqrt': False,  # PCA of square-rooted inputs (Hellinger distance); inputs >= 0.
    'encoder_input_size': None,  # [height, width] a hub encoder expects (None: as is).
    'encoder_channels': None,  # Channels a hub encoder expects (grayscale is tiled).
}
_NA = {
    'activation_round': 25,  # R_c: every client takes part and is scored.
    'nu': 75.0,  # Percentile of the pooled global-model scores used as threshold.
    'temperature': 1.0,  # Energy-score temperature T.
    'threshold': 'pooled',  # 'pooled': server sees scores; 'private': only histograms.
    'score_range': [-50.0, 150.0],  # Private variant: histogram range of energy scores.
    'score_bins': 4000,  # Private variant: histogram bins (tau within one bin width).
}

_FEDDS = {
    'max_iter': 500,  # Dawid-Skene EM iterations at most.
    'tol': 1e-5,  # Stop when no posterior changes by more.
    'use_prior': True,  # Class prior in the E-step (the paper); False: uniform ([code]).
    'smoothing': 0.0,  # Laplace smoothing of the M-step counts.
    'weight_mode': 'reliability',  # 'reliability' (Eq. 8) or 'reliability_x_n'.
    'em': 'central',  # 'central': the server labels the public set with each client's
    # model and fits DS; 'federated': clients label it and the server sees only sums.
}

# name -> {parameter: default}
METHOD_PARAMS = {
    'fedavg': {},
    'fedprox': {'mu': 0.01},
    'fedln': dict(_NNC, **_NA),
    'fedln_nnc': dict(_NNC),
    'fedln_nafedavg': dict(_NA),
    'fedds': dict(_FEDDS),
    'fedds_fedprox': dict(_FEDDS, mu=0.01),
}


def _check(condition: bool, field: str, message: str):
  if not condition:
    raise ConfigError(f'method.params.{field}: {message}')


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def resolve_params(name: str, params: dict, rounds: int = None) -> dict:
  """Returns the method's parameters with defaults filled in; raises ConfigError.

  ``rounds`` (fl.rounds) bounds round-valued parameters such as FedLN's R_c.
  """
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
  if 'mu' in resolved:
    _check(_is_number(resolved['mu']) and resolved['mu'] > 0, 'mu',
           f"FedProx needs a number > 0, got {resolved['mu']!r}")
  if 'k' in resolved:
    k = resolved['k']
    _check(isinstance(k, int) and not isinstance(k, bool) and k >= 1, 'k',
           f'needs an integer >= 1, got {k!r}')
    _check(isinstance(resolved['encoder'], str) and resolved['encoder'], 'encoder',
           "needs 'pca' or a TF-Hub handle / SavedModel directory")
    _check(isinstance(resolved['pca_components'], int) and resolved['pca_components'] >= 1,
           'pca_components', f"needs an integer >= 1, got {resolved['pca_components']!r}")
    _check(isinstance(resolved['pca_sqrt'], bool), 'pca_sqrt',
           f"needs true or false, got {resolved['pca_sqrt']!r}")
  if 'nu' in resolved:
    _check(_is_number(resolved['nu']) and 0 < resolved['nu'] < 100, 'nu',
           f"needs a percentile in (0, 100), got {resolved['nu']!r}")
    _check(_is_number(resolved['temperature']) and resolved['temperature'] > 0,
           'temperature', f"needs a number > 0, got {resolved['temperature']!r}")
    _check(resolved['threshold'] in ('pooled', 'private'), 'threshold',
           f"needs 'pooled' or 'private', got {resolved['threshold']!r}")
    low_high = resolved['score_range']
    _check(isinstance(low_high, (list, tuple)) and len(low_high) == 2
           and all(_is_number(v) for v in low_high) and low_high[0] < low_high[1],
           'score_range', f'needs [low, high] with low < high, got {low_high!r}')
    _check(isinstance(resolved['score_bins'], int) and resolved['score_bins'] >= 2,
           'score_bins', f"needs an integer >= 2, got {resolved['score_bins']!r}")
    r_c = resolved['activation_round']
    _check(isinstance(r_c, int) and r_c >= 1, 'activation_round',
           f'needs an integer >= 1, got {r_c!r}')
    if rounds is not None:
      _check(r_c <= rounds, 'activation_round',
             f'R_c={r_c} is beyond the last round (fl.rounds={rounds})')
  if 'max_iter' in resolved:
    _check(isinstance(resolved['max_iter'], int) and resolved['max_iter'] >= 1, 'max_iter',
           f"needs an integer >= 1, got {resolved['max_iter']!r}")
    _check(_is_number(resolved['tol']) and resolved['tol'] >= 0, 'tol',
           f"needs a number >= 0, got {resolved['tol']!r}")
    _check(_is_number(resolved['smoothing']) and resolved['smoothing'] >= 0, 'smoothing',
           f"needs a number >= 0, got {resolved['smoothing']!r}")
    _check(isinstance(resolved['use_prior'], bool), 'use_prior', 'needs true or false')
    _check(resolved['weight_mode'] in ('reliability', 'reliability_x_n'), 'weight_mode',
           f"needs 'reliability' or 'reliability_x_n', got {resolved['weight_mode']!r}")
    _check(resolved['em'] in ('central', 'federated'), 'em',
           f"needs 'central' or 'federated', got {resolved['em']!r}")
  return resolved


def validate(config) -> dict:
  """Checks the config's method against its parameters and data; returns the params."""
  params = resolve_params(config.method.name, config.method.params, config.fl.rounds)
  if config.method.name.startswith('fedds') and config.data.public_fraction <= 0:
    raise ConfigError(f"data.public_fraction: method '{config.method.name}' needs an "
                      'unlabelled public split; set it in (0, 1), e.g. 0.1 as in the paper')
  return params
