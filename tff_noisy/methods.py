"""The method registry: every method a config can name, its typed parameters, its algorithm.

Kept free of TensorFlow so that a config is validated before anything heavy is imported;
``tff_noisy.federated.algorithms.method_class`` imports the algorithm a name points to.
Parameters are dataclasses; groups that several methods share (the encoder of NNC,
NA-FedAvg's estimation, FedProx's mu) are one class each, so two methods can reuse a
group and no method's parameter can collide with another's. ``check`` methods raise
:class:`ConfigError` naming the field (``method.params.k``).
"""

import dataclasses
import difflib
import typing
from typing import Optional

from tff_noisy.errors import ConfigError

_FIELD = 'method.params.'


def _number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool)


def _require(condition: bool, name: str, message: str, value) -> None:
  if not condition:
    raise ConfigError(f'{_FIELD}{name}: needs {message}, got {value!r}')


@dataclasses.dataclass(frozen=True)
class Params:
  """Parameters of a method that has none (FedAvg); the base of every parameter class.

  ``validate`` checks every value's type from the annotations, then ``check``: each
  class checks its own values' ranges and calls ``super().check`` (so a method that
  combines groups checks them all, its own first).
  """

  def validate(self, rounds: int) -> None:
    """Raises ConfigError unless every value is allowed; ``rounds`` is fl.rounds."""
    self._check_types()
    self.check(rounds)

  def check(self, rounds: int) -> None:
    del rounds

  def _check_types(self) -> None:
    hints = typing.get_type_hints(type(self))
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      annotation = hints[field.name]
      if typing.get_origin(annotation) is typing.Union:
        if value is None:
          continue
        annotation = typing.get_args(annotation)[0]
      checks = {int: (_integer, 'an integer'), float: (_number, 'a number'),
                bool: (lambda v: isinstance(v, bool), 'true or false'),
                str: (lambda v: isinstance(v, str) and bool(v), 'a non-empty string'),
                list: (lambda v: isinstance(v, (list, tuple)), 'a list')}
      test, what = checks[annotation]
      _require(test(value), field.name, what, value)


@dataclasses.dataclass(frozen=True)
class ProximalParams(Params):
  mu: float = 0.01  # FedProx proximal strength (Li et al. 2020, Eq. 2).

  def check(self, rounds):
    _require(self.mu > 0, 'mu', 'a number > 0 (FedProx)', self.mu)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class LabelSmoothingParams(Params):
  """Label smoothing (Müller et al. 2019; FedLN Table 1's LS)."""
  smoothing: float = 0.1  # s: targets (1 - s)·onehot + s/C (FedLN does not state its s).

  def check(self, rounds):
    _require(0 <= self.smoothing < 1, 'smoothing', 'a number in [0, 1)', self.smoothing)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class BiTemperedParams(Params):
  """Bi-tempered logistic loss (Amid et al. 2019; FedLN Table 1's Bi-Temp). FedLN does
  not state its temperatures; the defaults are a mild pair from Amid et al.'s range."""
  t1: float = 0.8  # Temperature of the loss' log, in (0, 1] (1: the log's own).
  t2: float = 1.2  # Temperature of the tempered softmax, >= 1 (heavier tail above 1).
  smoothing: float = 0.0  # Amid et al.'s code: (1 - C/(C-1)·s)·onehot + s/(C-1).
  num_iters: int = 5  # Fixed-point iterations of the softmax's normaliser.

  def check(self, rounds):
    _require(0 < self.t1 <= 1, 't1', 'a number in (0, 1]', self.t1)
    _require(self.t2 >= 1, 't2', 'a number >= 1', self.t2)
    _require(0 <= self.smoothing < 1, 'smoothing', 'a number in [0, 1)', self.smoothing)
    _require(self.num_iters >= 1, 'num_iters', 'an integer >= 1', self.num_iters)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class SymmetricCEParams(Params):
  """Symmetric cross-entropy (Wang et al. 2019; LSC's and MaskedOptim's SCE baseline)."""
  alpha: float = 0.1  # Weight of cross-entropy (Wang et al.'s CIFAR-10 value).
  beta: float = 1.0  # Weight of reverse cross-entropy (Wang et al.'s CIFAR-10 value).
  log_zero: float = -4.0  # A: log 0 in the reverse cross-entropy (Wang et al.).

  def check(self, rounds):
    _require(self.alpha >= 0, 'alpha', 'a number >= 0', self.alpha)
    _require(self.beta >= 0, 'beta', 'a number >= 0', self.beta)
    _require(self.alpha + self.beta > 0, 'alpha', 'alpha + beta > 0', self.alpha)
    _require(self.log_zero < 0, 'log_zero', 'a number < 0', self.log_zero)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class GCEParams(Params):
  """Generalized cross-entropy (Zhang & Sabuncu 2018; MaskedOptim's GCE baseline)."""
  q: float = 0.7  # (1 - p_y^q)/q: q -> 0 is cross-entropy, q = 1 MAE (their default 0.7).

  def check(self, rounds):
    _require(0 < self.q <= 1, 'q', 'a number in (0, 1]', self.q)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class ConfidentLearningParams(Params):
  """Confident Learning (Northcutt et al. 2021; FedLN Table 1's CL, FedEFC's baseline)."""
  folds: int = 5  # k of the k-fold cross-validation giving out-of-sample probabilities.

  def check(self, rounds):
    _require(self.folds >= 2, 'folds', 'an integer >= 2', self.folds)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class EncoderParams(Params):
  """A frozen encoder of client inputs (NNC's kNN vote; LSC's neighbours)."""
  encoder: str = 'pca'  # 'pca' (label-free, offline) or a TF-Hub handle / SavedModel dir.
  pca_components: int = 50
  pca_sqrt: bool = False  # PCA of square-rooted inputs (Hellinger distance); inputs >= 0.
  encoder_input_size: Optional[list] = None  # [height, width] a hub encoder expects.
  encoder_channels: Optional[int] = None  # Channels a hub encoder expects (gray is tiled).

  def check(self, rounds):
    _require(self.pca_components >= 1, 'pca_components', 'an integer >= 1',
             self.pca_components)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class NNCParams(EncoderParams):
  k: int = 100  # Neighbours in the vote, the sample itself included (clipped to the client).

  def check(self, rounds):
    _require(self.k >= 1, 'k', 'an integer >= 1', self.k)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class LSCParams(EncoderParams):
  """LSC (specs/lsc.md §2, §4); ``encoder: random`` is a frozen, randomly initialised
  copy of the ``embed pretrain`` backbone: the paper's Table 4 control."""
  k: int = 4  # In-batch neighbours K from the encoder (clipped to batch size - 1).
  temperature: float = 0.3  # T of the cosine similarities.
  lam: float = 3.0  # lambda, the weight of the contrastive term next to cross-entropy.
  exclude_self: bool = True  # False: the denominator keeps l = j (Eq. 2 as written).

  def check(self, rounds):
    _require(self.k >= 1, 'k', 'an integer >= 1', self.k)
    _require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    _require(self.lam >= 0, 'lam', 'a number >= 0', self.lam)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class NoiseAwareParams(Params):
  """NA-FedAvg's noise estimation (specs/fedln.md Eq. 2)."""
  activation_round: int = 25  # R_c: every client takes part and is scored.
  nu: float = 75.0  # Percentile of the pooled global-model scores used as threshold.
  temperature: float = 1.0  # Energy-score temperature T.
  threshold: str = 'pooled'  # 'pooled': server sees scores; 'private': only histograms.
  score_range: list = (-50.0, 150.0)  # Private variant: histogram range of energy scores.
  score_bins: int = 4000  # Private variant: histogram bins (tau within one bin width).

  def check(self, rounds):
    _require(0 < self.nu < 100, 'nu', 'a percentile in (0, 100)', self.nu)
    _require(self.temperature > 0, 'temperature', 'a number > 0', self.temperature)
    _require(self.threshold in ('pooled', 'private'), 'threshold', "'pooled' or 'private'",
             self.threshold)
    low_high = self.score_range
    _require(len(low_high) == 2 and all(_number(v) for v in low_high)
             and low_high[0] < low_high[1], 'score_range', '[low, high] with low < high',
             low_high)
    _require(self.score_bins >= 2, 'score_bins', 'an integer >= 2', self.score_bins)
    _require(self.activation_round >= 1, 'activation_round', 'an integer >= 1',
             self.activation_round)
    _require(self.activation_round <= rounds, 'activation_round',
             f'a round within fl.rounds={rounds}', self.activation_round)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class FedLNParams(NNCParams, NoiseAwareParams):
  """NNC and NA-FedAvg together."""


@dataclasses.dataclass(frozen=True)
class FedDSParams(Params):
  max_iter: int = 500  # Dawid-Skene EM iterations at most.
  tol: float = 1e-5  # Stop when no posterior changes by more.
  use_prior: bool = True  # Class prior in the E-step (the paper); False: uniform ([code]).
  smoothing: float = 0.0  # Laplace smoothing of the M-step counts.
  weight_mode: str = 'reliability'  # 'reliability' (Eq. 8) or 'reliability_x_n'.
  em: str = 'central'  # 'central': the server fits DS on the clients' public-set labels;
  # 'federated': clients label the public set and the server sees only summed EM terms.

  def check(self, rounds):
    _require(self.max_iter >= 1, 'max_iter', 'an integer >= 1', self.max_iter)
    _require(self.tol >= 0, 'tol', 'a number >= 0', self.tol)
    _require(self.smoothing >= 0, 'smoothing', 'a number >= 0', self.smoothing)
    _require(self.weight_mode in ('reliability', 'reliability_x_n'), 'weight_mode',
             "'reliability' or 'reliability_x_n'", self.weight_mode)
    _require(self.em in ('central', 'federated'), 'em', "'central' or 'federated'", self.em)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class FedDSProxParams(FedDSParams, ProximalParams):
  """FedDS weighting over FedProx local training."""


@dataclasses.dataclass(frozen=True)
class PrestopParams(Params):
  """FedEFC's prestopping monitor (specs/fedefc.md §2): when training switches phase."""
  t_mon: int = 10  # Only rounds after t_mon are monitored.
  gamma: int = 3  # gamma_thr: non-improving monitored rounds that fire the switch.
  signal: str = 'global'  # 'global': received model's accuracy on own labels (Eq. 2);
  # 'training': running training accuracy ([code]).
  rule: str = 'best'  # 'best': beat the best so far ([code]); 'previous': the last round.

  def check(self, rounds):
    _require(self.t_mon >= 0, 't_mon', 'an integer >= 0', self.t_mon)
    _require(self.t_mon < rounds, 't_mon', f'a round before the last (fl.rounds={rounds})',
             self.t_mon)
    _require(self.gamma >= 1, 'gamma', 'an integer >= 1', self.gamma)
    _require(self.signal in ('global', 'training'), 'signal', "'global' or 'training'",
             self.signal)
    _require(self.rule in ('best', 'previous'), 'rule', "'best' or 'previous'", self.rule)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class CorrectionParams(PrestopParams):
  """Forward correction after the switch, with each client's own transition matrix."""
  prior_comp: bool = False  # [code]'s class-prior compensation of the matrix.
  report_matrix_error: bool = True  # Simulation: the matrices' errors at the switch.


@dataclasses.dataclass(frozen=True)
class FedEFCParams(CorrectionParams):
  normalise: str = 'column'  # Eq. 9: 'column' (p(noisy | true)) or 'row' (ablation).

  def check(self, rounds):
    _require(self.normalise in ('column', 'row'), 'normalise', "'column' or 'row'",
             self.normalise)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class ForwardCorrectionParams(CorrectionParams):
  anchor_percentile: float = 97.0  # Patrini's anchors: samples at or above it, per class.

  def check(self, rounds):
    _require(0 < self.anchor_percentile <= 100, 'anchor_percentile',
             'a percentile in (0, 100]', self.anchor_percentile)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class MaskedOptimParams(Params):
  """MaskedOptim (specs/maskedoptim.md §2, §4, §8). Rounds 1..warmup_rounds warm up on
  logit-adjusted CE; before round warmup_rounds + 1 every client is probed and the GMM
  vote flags the noisy ones for the rest of training. Configs set
  ``fl.aggregator: geometric_median_per_tensor`` (the paper's aggregation)."""
  warmup_rounds: int = 30  # T_w: detection runs before round T_w + 1 (paper, code 30; code_v1 20).
  alpha: float = 0.5  # Weight of the compatibility term -log y^d_ŷ.
  beta: Optional[float] = None  # Weight of the entropy term; null: 0.1 (paper, code), 0.2 (code_v1).
  tau: float = 0.8  # Share of a batch's smallest-loss samples the mask keeps (paper, code).
  label_lr: float = 1000.0  # η: plain GD rate of the label logits (batch-mean gradient).
  label_scale: float = 10.0  # K: label logits start at K·onehot; the merge rescales by K.
  zeta: float = 0.8  # Pre-merge ζ (Eq. 16): a noisy client's update is scaled by ζ.
  mask: bool = True  # False: the no-mask ablation (every sample's m = 1).
  loss_variant: str = 'paper'  # 'paper' (§2.3), 'code' (§8.1: the released code now) or
  # 'code_v1' (its first commit: LogitClip, argmax mask).
  logit_clip: float = 1.0  # τ_c of LogitClip (code_v1 only).
  gmm_fits: int = 9  # GMM fits (random_state 0..gmm_fits-1) in the detection vote.

  def beta_value(self) -> float:
    """β: the configured one, else the variant's default."""
    if self.beta is not None:
      return float(self.beta)
    return 0.2 if self.loss_variant == 'code_v1' else 0.1

  def check(self, rounds):
    _require(self.warmup_rounds >= 1, 'warmup_rounds', 'an integer >= 1',
             self.warmup_rounds)
    _require(self.warmup_rounds < rounds, 'warmup_rounds',
             f'a round before the last (fl.rounds={rounds}): detection runs after it',
             self.warmup_rounds)
    _require(self.alpha >= 0, 'alpha', 'a number >= 0', self.alpha)
    if self.beta is not None:
      _require(self.beta >= 0, 'beta', 'a number >= 0 (or null for the default)', self.beta)
    _require(0 < self.tau <= 1, 'tau', 'a share in (0, 1]', self.tau)
    _require(self.label_lr > 0, 'label_lr', 'a number > 0', self.label_lr)
    _require(self.label_scale > 0, 'label_scale', 'a number > 0', self.label_scale)
    _require(0 < self.zeta <= 1, 'zeta', 'a number in (0, 1]', self.zeta)
    _require(self.loss_variant in ('paper', 'code', 'code_v1'), 'loss_variant',
             "'paper', 'code' or 'code_v1'", self.loss_variant)
    _require(self.logit_clip > 0, 'logit_clip', 'a number > 0', self.logit_clip)
    _require(self.gmm_fits >= 1, 'gmm_fits', 'an integer >= 1', self.gmm_fits)
    super().check(rounds)


@dataclasses.dataclass(frozen=True)
class MethodSpec:
  params: type  # A Params subclass.
  algorithm: str  # 'module:Class' of its ``Method`` in tff_noisy.federated.algorithms.
  summary: str
  needs_public_split: bool = False
  # Why its clients cannot train on devices (fl.client_runtime: tflite); '' if they can.
  off_device: str = ''


# The client objectives tflite_export/training.py runs on devices.
DEVICE_OBJECTIVES = ('cross-entropy, FedProx, the robust baseline losses and forward '
                     'correction')
_ALGORITHMS = 'tff_noisy.federated.algorithms.'
METHODS = {
    'fedavg': MethodSpec(Params, _ALGORITHMS + 'fedavg:FedAvg', 'FedAvg (baseline)'),
    'fedprox': MethodSpec(ProximalParams, _ALGORITHMS + 'fedprox:FedProx',
                          'FedProx (baseline): local proximal term'),
    'label_smoothing': MethodSpec(LabelSmoothingParams,
                                  _ALGORITHMS + 'robust_losses:LabelSmoothing',
                                  'Label smoothing (baseline; Müller et al. 2019)'),
    'bi_tempered': MethodSpec(BiTemperedParams, _ALGORITHMS + 'robust_losses:BiTempered',
                              'Bi-tempered logistic loss (baseline; Amid et al. 2019)'),
    'sce': MethodSpec(SymmetricCEParams, _ALGORITHMS + 'robust_losses:SymmetricCE',
                      'Symmetric cross-entropy (baseline; Wang et al. 2019)'),
    'gce': MethodSpec(GCEParams, _ALGORITHMS + 'robust_losses:GeneralizedCE',
                      'Generalized cross-entropy (baseline; Zhang & Sabuncu 2018)'),
    'confident_learning': MethodSpec(
        ConfidentLearningParams, _ALGORITHMS + 'confident_learning:ConfidentLearning',
        "Confident Learning (baseline; Northcutt et al. 2021): each client drops the label "
        'issues cleanlab finds with k-fold probabilities of its own data'),
    'fedln': MethodSpec(FedLNParams, _ALGORITHMS + 'fedln:FedLN',
                        'FedLN: NNC label correction + NA-FedAvg weighting'),
    'fedln_nnc': MethodSpec(NNCParams, _ALGORITHMS + 'fedln:FedLNNNC',
                            'FedLN: NNC kNN label correction only'),
    'fedln_nafedavg': MethodSpec(NoiseAwareParams, _ALGORITHMS + 'fedln:FedLNNAFedAvg',
                                 'FedLN: NA-FedAvg noise-aware weighting only'),
    'fedds': MethodSpec(FedDSParams, _ALGORITHMS + 'fedds:FedDS',
                        'FedDS: Dawid-Skene client reliabilities as weights',
                        needs_public_split=True),
    'fedds_fedprox': MethodSpec(FedDSProxParams, _ALGORITHMS + 'fedds:FedDS',
                                'FedDS over FedProx local training', needs_public_split=True),
    'lsc': MethodSpec(LSCParams, _ALGORITHMS + 'lsc:LSC',
                      'LSC: local K-similarity contrastive term on a frozen encoder',
                      off_device="its loss reads the model's penultimate features and "
                      "per-example encoder embeddings (LSC's K-similarity objective)"),
    'fedefc': MethodSpec(FedEFCParams, _ALGORITHMS + 'fedefc:FedEFC',
                         'FedEFC: prestopping, then confident-joint forward correction'),
    'forward_correction': MethodSpec(
        ForwardCorrectionParams, _ALGORITHMS + 'fedefc:ForwardCorrection',
        'Forward correction (Patrini anchors) after the FedEFC prestopping switch'),
    'maskedoptim': MethodSpec(
        MaskedOptimParams, _ALGORITHMS + 'maskedoptim:MaskedOptim',
        'MaskedOptim: GMM noisy-client detection, masked end-to-end label correction',
        off_device='its objective trains per-example label logits beside the model'),
}


def device_support() -> str:
  """What trains on devices (``fl.client_runtime: tflite``), for error messages."""
  names = [name for name, spec in METHODS.items() if not spec.off_device]
  return (f'supported on devices: the {DEVICE_OBJECTIVES} objectives (methods '
          f'{", ".join(names)})')


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
  if name not in METHODS:
    close = difflib.get_close_matches(str(name), list(METHODS), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ''
    raise ConfigError(f"method.name: unknown method '{name}'; {hint}"
                      f"allowed: {', '.join(METHODS)}")
  allowed = param_names(name)
  for key in params:
    if key not in allowed:
      owners = param_owners(key)
      close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
      belongs = f" (it belongs to {', '.join(owners)})" if owners else ''
      hint = f"; did you mean '{close[0]}'?" if close else ''
      raise ConfigError(f"{_FIELD}{key}: not a parameter of '{name}'{belongs}{hint} "
                        f"Allowed: {', '.join(allowed) or 'none'}")
  resolved = METHODS[name].params(**params)
  resolved.validate(rounds)
  return resolved


def validate(config) -> Params:
  """Checks the config's method against its parameters and data; returns the params."""
  params = resolve_params(config.method.name, config.method.params, config.fl.rounds)
  if METHODS[config.method.name].needs_public_split and config.data.public_fraction <= 0:
    raise ConfigError(f"data.public_fraction: method '{config.method.name}' needs an "
                      'unlabelled public split; set it in (0, 1), e.g. 0.1 as in the paper')
  off_device = METHODS[config.method.name].off_device
  if config.fl.client_runtime == 'tflite' and off_device:
    raise ConfigError(f"fl.client_runtime: tflite, but method '{config.method.name}' "
                      f'cannot train on devices: {off_device}; {device_support()}')
  return params
