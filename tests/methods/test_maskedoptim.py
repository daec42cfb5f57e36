"""MaskedOptim's client part in the federated process: types first, then numbers.

A toy Dense model and one full-batch SGD step per round. A clean client's update is one
step on the logit-adjusted cross-entropy with its observed-label prior, and its label
logits do not move; a noisy client's label logits take the η step of the closed-form
gradient, then merge with the trained model's probabilities, its update is scaled by ζ,
and the next round starts from the logits it returned.
"""

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

import helpers
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods.maskedoptim.parts import MaskedOptimLoss
from tff_noisy.ops import label_distribution as ld
from tff_noisy.ops import label_distribution_tf as ld_tf
from tff_noisy.simulation import assembly
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_CLASSES = 3
_LR = 0.5
_ARGS = dict(alpha=0.5, beta=0.1, tau=0.8, label_lr=100.0, zeta=0.8)


def _client(seed, n):
  x, y = helpers.random_client(seed, n, classes=_CLASSES)
  y[:2] = 0  # Class 2 may be absent; 0 never is.
  return x, y


@pytest.fixture(scope='module')
def paper():
  x, y = _client(0, 4)
  return process_lib.build_process(helpers.linear_model,
                                   helpers.client_dataset(x, y).element_spec,
                                   tff.learning.optimizers.build_sgdm(_LR),
                                   program=ClientProgram([MaskedOptimLoss(_CLASSES, **_ARGS)]))


def _start(process, model):
  return assembly.initial_state(process, model)


def _sgd_step(model, x, loss_fn):
  """The weights after one full-batch SGD step on mean(loss_fn(logits))."""
  local = helpers.linear_model()
  local.set_weights(model.get_weights())
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(loss_fn(local(x)))
  grads = tape.gradient(loss, local.trainable_variables)
  return [w - _LR * g.numpy() for w, g in zip(model.get_weights(), grads)]


def _logits(weights, x):
  return x @ weights[0] + weights[1]


def test_type_signature(paper):
  signature = paper._next.type_signature  # pylint: disable=protected-access
  state = signature.parameter[2].member
  assert str(state.noisy) == 'int32' and str(state.label_logits) == 'float32[?,3]'
  assert signature.result[2].member == state
  names = [n for n, _ in tff.structure.iter_elements(
      signature.result[1].member.client_work.train.objective)]
  assert names == ['noisy_client']


def test_clean_client_trains_on_the_logit_adjusted_loss_and_keeps_its_labels(paper):
  tf.keras.utils.set_random_seed(0)
  model = helpers.linear_model()
  x, y = _client(1, 12)
  state = paper.program.initial_state(y)
  out = paper.next(_start(paper, model), [helpers.client_data(x, y)], [state])
  prior = ld.class_prior(y, _CLASSES)
  expected = _sgd_step(model, x, lambda z: ld_tf.logit_adjusted_cross_entropy(
      y, z, tf.math.log(tf.constant(prior, tf.float32))))
  for got, want in zip(paper.get_model_weights(out.state).trainable, expected):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(out.client_states[0]['label_logits'], state['label_logits'])
  assert int(out.client_states[0]['noisy']) == 0
  assert out.metrics['client_work']['train']['objective']['noisy_client'] == 0.0


def test_noisy_client_corrects_its_labels_and_they_persist(paper):
  tf.keras.utils.set_random_seed(1)
  model = helpers.linear_model()
  x, y = _client(2, 10)
  state = paper.program.initial_state(y)
  state['noisy'] = np.int32(1)
  received = model.get_weights()
  out = paper.next(_start(paper, model), [helpers.client_data(x, y)], [state])
  # Network: one step on the label-distribution loss, then the pre-merge with ζ.
  rows = state['label_logits']
  trained = _sgd_step(model, x, lambda z: ld_tf.label_distribution_loss(
      y, z, tf.constant(rows), alpha=0.5, beta=0.1, tau=0.8))
  zeta = _ARGS['zeta']
  for got, start, local in zip(paper.get_model_weights(out.state).trainable, received, trained):
    np.testing.assert_allclose(got, start - zeta * (start - local), rtol=1e-5, atol=1e-6)
  # Labels: the η step on the received model's closed-form gradient, then the merge with
  # the trained (not pre-merged) model's probabilities.
  stepped = ld.update_label_logits(rows, ld.label_logits_gradient(
      _logits(received, x), rows, y, alpha=0.5, tau=0.8), _ARGS['label_lr'])
  probs = scipy.special.softmax(_logits(trained, x), axis=1)
  merged = ld.merge_label_logits(stepped, probs, 10.0)
  first = out.client_states[0]
  np.testing.assert_allclose(first['label_logits'], merged, rtol=1e-4, atol=1e-5)
  assert int(first['noisy']) == 1
  assert not np.allclose(first['label_logits'], rows)  # They moved.
  assert out.metrics['client_work']['train']['objective']['noisy_client'] == 1.0
  # Round 2 from the returned logits: its step starts there, not at K·onehot.
  out2 = paper.next(out.state, [helpers.client_data(x, y)], [first])
  global_weights = list(paper.get_model_weights(out.state).trainable)
  stepped2 = ld.update_label_logits(first['label_logits'], ld.label_logits_gradient(
      _logits(global_weights, x), first['label_logits'], y, alpha=0.5, tau=0.8),
                                    _ARGS['label_lr'])
  local2 = [w + (g - w) / zeta for w, g in
            zip(global_weights, paper.get_model_weights(out2.state).trainable)]
  expected2 = ld.merge_label_logits(stepped2, scipy.special.softmax(_logits(local2, x), 1), 10)
  np.testing.assert_allclose(out2.client_states[0]['label_logits'], expected2, rtol=1e-4,
                             atol=1e-4)


@pytest.mark.slow
def test_code_variant_without_mask():
  x, y = _client(3, 9)
  program = ClientProgram([MaskedOptimLoss(_CLASSES, **_ARGS, mask=False, variant='code')])
  process = process_lib.build_process(helpers.linear_model,
                                      helpers.client_dataset(x, y).element_spec,
                                      tff.learning.optimizers.build_sgdm(_LR),
                                      program=program)
  tf.keras.utils.set_random_seed(2)
  model = helpers.linear_model()
  state = program.initial_state(y)
  state['noisy'] = np.int32(1)
  out = process.next(_start(process, model), [helpers.client_data(x, y)], [state])
  kwargs = dict(alpha=0.5, beta=0.1, mask=False, variant='code')
  trained = _sgd_step(model, x, lambda z: ld_tf.label_distribution_loss(
      y, z, tf.constant(state['label_logits']), **kwargs))
  stepped = ld.update_label_logits(state['label_logits'], ld.label_logits_gradient(
      _logits(model.get_weights(), x), state['label_logits'], y, alpha=0.5, mask=False,
      variant='code'), _ARGS['label_lr'])
  merged = ld.merge_label_logits(stepped, scipy.special.softmax(_logits(trained, x), 1), 10.0)
  np.testing.assert_allclose(out.client_states[0]['label_logits'], merged, rtol=1e-4,
                             atol=1e-5)
