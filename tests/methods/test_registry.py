"""The method registry: typed parameters, clear errors, one entry per method."""
import dataclasses
import types

import pytest

import helpers

from tff_noisy import methods
from tff_noisy.embeddings.params import EncoderParams
from tff_noisy.errors import ConfigError
from tff_noisy.methods import fedds
from tff_noisy.methods import fedln
from tff_noisy.methods import recipe
from tff_noisy.methods.common import ProximalParams


@pytest.mark.parametrize('name', sorted(methods.METHODS))
def test_every_registered_method_resolves_to_its_recipe(name):
  params = methods.resolve_params(name, {}, rounds=100)
  assert isinstance(params, methods.METHODS[name].params)
  setup = types.SimpleNamespace(num_classes=10, client_lr=0.1, seed=0, rounds=100,
                                weight_decay=0.0, model_fn=lambda: helpers.linear_model(4, 10))
  assert isinstance(methods.METHODS[name].resolve()(params, setup), recipe.Recipe)


def test_shared_groups_are_one_class():
  assert issubclass(fedln.FedLNParams, fedln.NNCParams)
  assert issubclass(fedln.FedLNParams, fedln.NoiseAwareParams)
  assert issubclass(fedln.NNCParams, EncoderParams)
  assert issubclass(fedds.FedDSProxParams, ProximalParams)
  fields = [f.name for f in dataclasses.fields(fedln.FedLNParams)]
  assert len(fields) == len(set(fields))


@pytest.mark.parametrize('name, params, match', [
    ('fedavg', {'k': 3}, r"method.params.k: not a parameter of 'fedavg' \(it belongs to "
                         r'fedln, fedln_nnc, lsc\)'),
    ('fedprox', {'nu': 1}, r"belongs to fedln, fedln_nafedavg\); did you mean 'mu'\?"),
    ('fedln_nnc', {'k': 'ten'}, r"method.params.k: needs an integer, got 'ten'"),
    ('fedln_nnc', {'k': 0}, 'method.params.k: needs an integer >= 1, got 0'),
    ('fedln', {'nu': 100}, r'method.params.nu: needs a percentile in \(0, 100\)'),
    ('fedln_nafedavg', {'activation_round': 200}, 'a round within fl.rounds=100'),
    ('fedds', {'em': 'remote'}, "method.params.em: needs 'central' or 'federated'"),
    ('fedds_fedprox', {'mu': 0}, 'method.params.mu: needs a number > 0'),
    ('lsc', {'k': 0}, 'method.params.k: needs an integer >= 1, got 0'),
    ('lsc', {'temperature': 0}, 'method.params.temperature: needs a number > 0, got 0'),
    ('lsc', {'temperature': -0.3}, 'method.params.temperature: needs a number > 0'),
    ('lsc', {'lam': -1}, 'method.params.lam: needs a number >= 0, got -1'),
    ('lsc', {'pca_components': 0}, 'method.params.pca_components: needs an integer >= 1'),
    ('lsc', {'weight': 3}, "method.params.weight: not a parameter of 'lsc'"),
    ('fedefc', {'gamma': 0}, 'method.params.gamma: needs an integer >= 1, got 0'),
    ('fedefc', {'t_mon': 99}, r'method.params.t_mon: needs a first monitored round '
                              r'\(t_mon \+ 2 with monitor_from code\) within fl.rounds=100, '
                              r'got 99'),
    ('fedefc', {'t_mon': 100, 'monitor_from': 'paper'},
     r'needs a first monitored round \(t_mon \+ 1 with monitor_from paper\) within '
     r'fl.rounds=100, got 100'),
    ('fedefc', {'monitor_from': 'round0'},
     "method.params.monitor_from: needs 'code' or 'paper', got 'round0'"),
    ('forward_correction', {'monitor_from': 'zero'}, "needs 'code' or 'paper'"),
    ('fedefc', {'guess': 'argmax'},
     "method.params.guess: needs 'passing' or 'cleanlab', got 'argmax'"),
    ('forward_correction', {'guess': 'cleanlab'}, r"belongs to fedefc\)"),
    ('fedefc', {'t_mon': -1}, 'method.params.t_mon: needs an integer >= 0, got -1'),
    ('fedefc', {'signal': 'train'}, "method.params.signal: needs 'global' or 'training'"),
    ('fedefc', {'rule': 'last'}, "method.params.rule: needs 'best' or 'previous'"),
    ('fedefc', {'normalise': 'both'}, "method.params.normalise: needs 'column' or 'row', "
                                      "got 'both'"),
    ('fedefc', {'anchor_percentile': 90}, r"not a parameter of 'fedefc' \(it belongs to "
                                          r'forward_correction\)'),
    ('forward_correction', {'gamma': 0.5}, 'method.params.gamma: needs an integer'),
    ('forward_correction', {'anchor_percentile': 0},
     r'method.params.anchor_percentile: needs a percentile in \(0, 100\]'),
    ('forward_correction', {'normalise': 'row'}, r"belongs to fedefc\)"),
    ('fedavgg', {}, "method.name: unknown method 'fedavgg'; did you mean 'fedavg'?"),
    ('maskedoptim', {'warmup_rounds': 100},
     r'method.params.warmup_rounds: needs a round before the last \(fl.rounds=100\): '
     r'detection runs after it, got 100'),
    ('maskedoptim', {'warmup_rounds': 0},
     'method.params.warmup_rounds: needs an integer >= 1, got 0'),
    ('maskedoptim', {'tau': 0}, r'method.params.tau: needs a share in \(0, 1\], got 0'),
    ('maskedoptim', {'tau': 1.2}, r'method.params.tau: needs a share in \(0, 1\], got 1.2'),
    ('maskedoptim', {'label_scale': 0}, 'method.params.label_scale: needs a number > 0, got 0'),
    ('maskedoptim', {'label_lr': -1}, 'method.params.label_lr: needs a number > 0, got -1'),
    ('maskedoptim', {'zeta': 0}, r'method.params.zeta: needs a number in \(0, 1\], got 0'),
    ('maskedoptim', {'alpha': -0.5}, 'method.params.alpha: needs a number >= 0, got -0.5'),
    ('maskedoptim', {'beta': -0.1}, 'method.params.beta: needs a number >= 0'),
    ('maskedoptim', {'loss_variant': 'torch'},
     "method.params.loss_variant: needs 'paper', 'code' or 'code_v1', got 'torch'"),
    ('maskedoptim', {'mask': 'no'}, "method.params.mask: needs true or false, got 'no'"),
    ('maskedoptim', {'gmm_fits': 0}, 'method.params.gmm_fits: needs an integer >= 1, got 0'),
    ('maskedoptim', {'logit_clip': 0}, 'method.params.logit_clip: needs a number > 0, got 0'),
    ('maskedoptim', {'eta': 10}, "method.params.eta: not a parameter of 'maskedoptim'"),
    ('label_smoothing', {'smoothing': 1.0},
     r'method.params.smoothing: needs a number in \[0, 1\), got 1.0'),
    ('label_smoothing', {'smoothing': -0.1}, r'method.params.smoothing: needs a number in'),
    ('bi_tempered', {'t1': 0}, r'method.params.t1: needs a number in \(0, 1\], got 0'),
    ('bi_tempered', {'t1': 1.1}, r'method.params.t1: needs a number in \(0, 1\], got 1.1'),
    ('bi_tempered', {'t2': 0.9}, 'method.params.t2: needs a number >= 1, got 0.9'),
    ('bi_tempered', {'smoothing': 1}, r'method.params.smoothing: needs a number in \[0, 1\)'),
    ('sce', {'alpha': -1}, 'method.params.alpha: needs a number >= 0, got -1'),
    ('sce', {'beta': -0.5}, 'method.params.beta: needs a number >= 0, got -0.5'),
    ('sce', {'log_zero': 0}, 'method.params.log_zero: needs a number < 0, got 0'),
    ('gce', {'q': 0}, r'method.params.q: needs a number in \(0, 1\], got 0'),
    ('gce', {'q': 1.5}, r'method.params.q: needs a number in \(0, 1\], got 1.5'),
    ('confident_learning', {'folds': 1}, 'method.params.folds: needs an integer >= 2, got 1'),
])
def test_bad_parameters_name_the_field(name, params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params(name, params, rounds=100)


def test_fedefc_follows_the_released_codes_monitor_start_by_default():
  params = methods.resolve_params('fedefc', {}, rounds=100)
  assert (params.monitor_from, params.guess) == ('code', 'passing')
  assert methods.resolve_params('forward_correction', {}, rounds=100).monitor_from == 'code'
  # The last t_mon each reading accepts: its first monitored round is the last round.
  assert methods.resolve_params('fedefc', {'t_mon': 98}, rounds=100).t_mon == 98
  assert methods.resolve_params('fedefc', {'t_mon': 99, 'monitor_from': 'paper'},
                                rounds=100).t_mon == 99


def test_maskedoptim_beta_defaults_to_the_variants():
  assert methods.resolve_params('maskedoptim', {}, rounds=100).beta_value() == 0.1
  code = methods.resolve_params('maskedoptim', {'loss_variant': 'code'}, rounds=100)
  assert code.beta_value() == 0.1  # The released code now uses the paper's beta.
  first = methods.resolve_params('maskedoptim', {'loss_variant': 'code_v1'}, rounds=100)
  assert first.beta_value() == 0.2
  assert methods.resolve_params('maskedoptim', {'beta': 0.3, 'loss_variant': 'code_v1'},
                                rounds=100).beta_value() == 0.3


def test_registry_imports_no_tensorflow():
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  code = ('import sys; from tff_noisy import validation; '
          'assert "tensorflow" not in sys.modules, "tensorflow imported"')
  subprocess.run([sys.executable, '-c', code], check=True)
