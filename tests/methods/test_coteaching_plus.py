"""Co-teaching+ (Yu et al. 2019, Algorithm 1) as a method: the server's schedule, the client
part's step on the two-network model (by hand on a toy model, and Co-teaching's before
init_epoch), the parameters, and digits runs (tf; equal on tff, slow)."""
import collections
import types

import helpers
import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated import client_work
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.coteaching.parts import CrossUpdateLoss
from tff_noisy.methods.coteaching_plus.algorithm import Schedule
from tff_noisy.methods.coteaching_plus.parts import CrossUpdatePlusLoss
from tff_noisy.methods.two_networks import two_networks
from tff_noisy.ops import coteaching_plus
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_LR = 0.5
_CLASSES = 3


class _Process:
  """What the server step uses of a process: ``set_hparams`` returns the hparams."""

  @staticmethod
  def set_hparams(state, hparams):
    del state
    return hparams


def _schedule(rounds, **params):
  params = methods.resolve_params('coteaching_plus', params, rounds=rounds)
  step = Schedule(params, rounds)
  server = types.SimpleNamespace(process=_Process())
  return [step.before(t, None, server) for t in range(1, rounds + 1)]


def test_the_server_sets_the_forget_rate_and_the_disagreement_switch():
  # rounds 10: T_k = ⌊0.2·10⌋ = 2, linspace(0, 0.2, 2) = [0, 0.2] then 0.2; init_epoch 3:
  # plain Co-teaching in rounds 1-3, the disagreement step from round 4.
  steps = _schedule(10, init_epoch=3)
  assert [float(h['forget_rate']) for h, _ in steps[:5]] == pytest.approx([0, 0.2, 0.2, 0.2, 0.2])
  assert [float(h['disagreement']) for h, _ in steps[:5]] == [0, 0, 0, 1, 1]
  assert steps[3][1] == {'forget_rate': pytest.approx(0.2), 'disagreement': True}
  assert steps[0][0]['forget_rate'].dtype == np.float32
  # 4 rounds: ⌊0.8⌋ = 0 ramp rounds, τ from round 1 (FNBench's empty linspace).
  assert float(_schedule(4, init_epoch=1)[0][0]['forget_rate']) == pytest.approx(0.2)
  ramp = _schedule(10, init_epoch=1, gradual_rounds=5, exponent=2.0)
  assert [float(h['forget_rate']) for h, _ in ramp[:6]] == pytest.approx(
      [0, 0.01, 0.02, 0.03, 0.04, 0.2])


def _client():
  """Six examples on which the two networks disagree at least twice (asserted)."""
  x, y = helpers.random_client(3, 6, features=4, classes=_CLASSES)
  return x, y


def _model():
  tf.keras.utils.set_random_seed(4)
  return two_networks(lambda: helpers.linear_model(4, _CLASSES))()


def _train(part, model, x, y, rate, disagreement):
  """The trained weights of one full-batch SGD step from ``model``'s (which it keeps)."""
  received = model.get_weights()
  initial = tf.nest.map_structure(lambda v: tf.constant(v.numpy()),
                                  client_work.model_weights_of(model))
  train = client_work.build_local_training(model, tff.learning.optimizers.build_sgdm(_LR),
                                           ClientProgram([part]), local_epochs=1)
  hparams = collections.OrderedDict(forget_rate=tf.constant(rate, tf.float32))
  if disagreement is not None:
    hparams['disagreement'] = tf.constant(disagreement, tf.float32)
  result, metrics, _ = train(initial, helpers.client_dataset(x, y), (), hparams)
  model.set_weights(received)
  return [w - u.numpy() for w, u in zip(received, result.update.trainable)], metrics


def test_a_disagreement_step_by_hand_on_the_logits():
  """CE on the logits (on_probabilities false): with n kept of the disagreement set D,
  ∂ℓ̄/∂z_f,j = m^g_j (softmax(z_f,j) − onehot(y_j))/n, so W_f ← W_f − lr·xᵀ∂Z_f and
  b_f ← b_f − lr·Σ_j ∂z_f,j (and the same for g with f's mask); no other example moves
  either network."""
  x, y = _client()
  model = _model()
  wf, bf, wg, bg = model.get_weights()
  zf, zg = x @ wf + bf, x @ wg + bg
  disagree = np.argmax(zf, 1) != np.argmax(zg, 1)
  assert disagree.sum() >= 2, 'the toy networks must disagree at least twice'
  n = int(np.floor(0.5 * disagree.sum()))
  ce_f = -np.log(scipy.special.softmax(zf, 1)[np.arange(6), y])
  ce_g = -np.log(scipy.special.softmax(zg, 1)[np.arange(6), y])
  keep_f = np.zeros(6, bool)
  keep_f[np.argsort(np.where(disagree, ce_f, np.inf), kind='stable')[:n]] = True
  keep_g = np.zeros(6, bool)
  keep_g[np.argsort(np.where(disagree, ce_g, np.inf), kind='stable')[:n]] = True
  onehot = np.eye(_CLASSES)[y]
  dzf = keep_g[:, None] * (scipy.special.softmax(zf, 1) - onehot) / n
  dzg = keep_f[:, None] * (scipy.special.softmax(zg, 1) - onehot) / n
  expected = [wf - _LR * x.T @ dzf, bf - _LR * dzf.sum(0), wg - _LR * x.T @ dzg,
              bg - _LR * dzg.sum(0)]
  got, metrics = _train(CrossUpdatePlusLoss(_CLASSES, on_probabilities=False), model, x, y,
                        0.5, 1.0)
  for g, e in zip(got, expected):
    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
  # The loss sum is B/n times the kept cross-entropies: 6·(mean over g's kept of CE_f + ...).
  assert float(metrics['loss_sum']) == pytest.approx(
      6 / n * (ce_f[keep_g].sum() + ce_g[keep_f].sum()), rel=1e-5)


def test_a_disagreement_step_on_the_probabilities_as_the_codes():
  """on_probabilities (the default): CE of softmax(softmax(z)); the masks as the NumPy ops
  choose them, the step the gradient of that masked loss."""
  x, y = _client()
  model = _model()
  weights = [tf.Variable(w) for w in model.get_weights()]
  zf, zg = (x @ w.numpy() + b.numpy() for w, b in (weights[:2], weights[2:]))
  keep_f, keep_g, n = coteaching_plus.selection(y, zf, zg, 0.5)
  assert n >= 1 and not keep_f.all()
  with tf.GradientTape() as tape:
    pf = tf.nn.softmax(tf.nn.softmax(x @ weights[0] + weights[1]))
    pg = tf.nn.softmax(tf.nn.softmax(x @ weights[2] + weights[3]))
    rows = np.arange(6)
    ce_f = -tf.math.log(tf.gather_nd(pf, np.stack([rows, y], 1)))
    ce_g = -tf.math.log(tf.gather_nd(pg, np.stack([rows, y], 1)))
    loss = (tf.reduce_sum(ce_f * keep_g) + tf.reduce_sum(ce_g * keep_f)) / n
  expected = [w.numpy() - _LR * g.numpy() for w, g in zip(weights, tape.gradient(loss, weights))]
  got, _ = _train(CrossUpdatePlusLoss(_CLASSES), model, x, y, 0.5, 1.0)
  for g, e in zip(got, expected):
    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_up_to_init_epoch_it_is_co_teaching():
  x, y = _client()
  model = _model()
  plain, _ = _train(CrossUpdatePlusLoss(_CLASSES), model, x, y, 0.5, 0.0)
  coteaching, _ = _train(CrossUpdateLoss(_CLASSES), model, x, y, 0.5, None)
  plus, _ = _train(CrossUpdatePlusLoss(_CLASSES), model, x, y, 0.5, 1.0)
  for a, b in zip(plain, coteaching):
    np.testing.assert_array_equal(a, b)
  assert helpers.max_difference(plain, plus) > 1e-4


def test_a_disagreement_set_too_small_skips_the_batch():
  # τ = 0.9 keeps ⌊0.1·|D|⌋ = 0 of a set of at most 6: 'skip' leaves both networks as they
  # are; 'all' trains on the whole of D.
  x, y = _client()
  model = _model()
  skipped, metrics = _train(CrossUpdatePlusLoss(_CLASSES), model, x, y, 0.9, 1.0)
  for a, b in zip(skipped, model.get_weights()):
    np.testing.assert_array_equal(a, b)
  assert float(metrics['loss_sum']) == 0.0
  kept_all, _ = _train(CrossUpdatePlusLoss(_CLASSES, none_kept='all'), model, x, y, 0.9, 1.0)
  assert helpers.max_difference(kept_all, model.get_weights()) > 1e-4


@pytest.mark.parametrize('params, match', [
    ({'forget_rate': 1.0}, r'^method.params.forget_rate: needs a number in \[0, 1\), got 1.0$'),
    ({'gradual_rounds': 11}, r'^method.params.gradual_rounds: needs a number of rounds in '
                             r'\[0, fl.rounds=10\] \(or null\), got 11$'),
    ({'init_epoch': 10, 'gradual_rounds': 2},
     r'^method.params.init_epoch: needs a number of rounds in \[0, fl.rounds=10\), got 10$'),
    ({'exponent': 0}, r'^method.params.exponent: needs a number > 0, got 0$'),
    ({'none_kept': 'none'}, r"^method.params.none_kept: needs 'skip' or 'all', got 'none'$"),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('coteaching_plus', {'init_epoch': 5, **params}, rounds=10)


def test_the_defaults_are_fnbench_s():
  params = methods.resolve_params('coteaching_plus', {}, rounds=100)
  assert (params.forget_rate, params.gradual(100), params.init_epoch, params.on_probabilities,
          params.none_kept) == (0.2, 20, 10, True, 'skip')


def _digits(runtime='tf', method='coteaching_plus', **params):
  return helpers.small_digits_config(method, runtime, params, rounds=3)


def test_coteaching_plus_runs_on_digits_and_is_not_co_teaching():
  run = helpers.run_rounds(_digits(init_epoch=1, gradual_rounds=1))
  assert [r['disagreement'] for r in run.history] == [False, True, True]
  assert [r['forget_rate'] for r in run.history] == pytest.approx([0.0, 0.2, 0.2])
  assert all(np.isfinite(r['test_accuracy']) for r in run.history)
  coteaching = helpers.run_rounds(_digits(method='coteaching', gradual_rounds=1))
  assert helpers.max_difference(run.final_weights(), coteaching.final_weights()) > 1e-4


@pytest.mark.slow
def test_coteaching_plus_runs_equally_on_tff_and_tf():
  runs = {runtime: helpers.run_rounds(_digits(runtime, init_epoch=1, gradual_rounds=1))
          for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  assert [r['test_accuracy'] for r in runs['tff'].history] == pytest.approx(
      [r['test_accuracy'] for r in runs['tf'].history], abs=1e-6)
