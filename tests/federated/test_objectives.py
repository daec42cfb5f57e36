"""Client objectives with state: the round trip, trainable per-example rows, hparams, probing.

Toy objectives only: a per-client round counter with a per-sample loss record (state out
of the epilogue), learnable per-sample logit offsets (trainable rows), and a loss scale
decided by the server (hparams). Each checks one seam against hand-computed values.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy.federated import client_work
from tff_noisy.federated import probe
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.objectives.base import ClientObjective
from tff_noisy.ops import losses
from tff_noisy.simulation import assembly
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_CLASSES = 3


class CountingObjective(ClientObjective):
  """Cross-entropy; counts a client's rounds and records each sample's last loss."""
  state_spec = {'rounds': tf.TensorSpec([], tf.int32),
                'last_loss': tf.TensorSpec([None], tf.float32)}

  def initial_state(self, labels):
    return {'rounds': np.int32(0), 'last_loss': np.zeros(len(labels), np.float32)}

  def epilogue(self, predict, dataset, context, state, hparams):
    last_loss = state['last_loss']
    for batch in dataset:
      last_loss = tf.tensor_scatter_nd_update(
          last_loss, batch['index'][:, None],
          losses.cross_entropy(batch['y'], predict(batch['x'])))
    return collections.OrderedDict(rounds=state['rounds'] + 1,
                                   last_loss=last_loss), tf.constant(1.0)


class OffsetObjective(ClientObjective):
  """Cross-entropy of logits + a learnable per-sample offset, the offsets' own GD step."""
  state_spec = {'offsets': tf.TensorSpec([None, _CLASSES], tf.float32)}
  trainable_state = 'offsets'
  hparams = {'loss_scale': np.float32(1.0)}
  row_lr = 10.0

  def initial_state(self, labels):
    return {'offsets': np.zeros((len(labels), _CLASSES), np.float32)}

  def loss(self, batch, logits, features, context, hparams, rows):
    return hparams['loss_scale'] * losses.cross_entropy(batch['y'], logits + rows)

  def update_rows(self, rows, gradients, hparams):
    return rows - self.row_lr * gradients


def _initial_state(process, model):
  return assembly.initial_state(process, model)


def _process(objective):
  x, y = helpers.random_client(0, 4)
  return process_lib.build_process(helpers.linear_model,
                                   helpers.client_dataset(x, y).element_spec,
                                   tff.learning.optimizers.build_sgdm(0.1),
                                   objective=objective)


@pytest.fixture(scope='module')
def counting():
  return _process(CountingObjective())


@pytest.fixture(scope='module')
def offsets():
  return _process(OffsetObjective())


def test_type_signature_carries_client_state(counting):
  signature = counting._next.type_signature  # pylint: disable=protected-access
  state_in = signature.parameter[2]
  state_out = signature.result[2]
  assert state_in.placement is tff.CLIENTS and state_out.placement is tff.CLIENTS
  assert state_in.member == state_out.member
  assert str(state_in.member.last_loss) == 'float32[?]'
  assert str(state_in.member.rounds) == 'int32'


@pytest.mark.slow
def test_state_round_trip_counts_rounds_and_records_losses(counting):
  tf.keras.utils.set_random_seed(0)
  model = helpers.linear_model()
  (xa, ya), (xb, yb) = helpers.random_client(1, 7), helpers.random_client(2, 5)
  objective = counting.objective
  states = [objective.initial_state(ya), objective.initial_state(yb)]
  datasets = [helpers.client_dataset(xa, ya), helpers.client_dataset(xb, yb)]
  out = counting.next(_initial_state(counting, model), datasets, states)
  assert [int(s['rounds']) for s in out.client_states] == [1, 1]
  assert [s['last_loss'].shape for s in out.client_states] == [(7,), (5,)]
  # Only client a again: its counter moves, and its losses are those of its local model.
  out2 = counting.next(out.state, [helpers.client_dataset(xa, ya)], [out.client_states[0]])
  assert int(out2.client_states[0]['rounds']) == 2
  local = helpers.linear_model()
  weights = counting.get_model_weights(out2.state)  # One client: global = its local model.
  weights.assign_weights_to(local)
  expected = losses.cross_entropy(ya, local(xa)).numpy()
  np.testing.assert_allclose(out2.client_states[0]['last_loss'], expected, rtol=1e-5)


def test_trainable_rows_take_their_own_gradient_step(offsets):
  tf.keras.utils.set_random_seed(1)
  model = helpers.linear_model()
  x, y = helpers.random_client(3, 6)
  rows = np.random.default_rng(0).normal(size=(6, _CLASSES)).astype(np.float32)
  out = offsets.next(_initial_state(offsets, model), [helpers.client_dataset(x, y)],
                     [{'offsets': rows}])
  # One full batch: the rows' step uses the received model and the batch-mean loss.
  variable = tf.Variable(rows)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(losses.cross_entropy(y, model(x) + variable))
  expected = rows - OffsetObjective.row_lr * tape.gradient(loss, variable).numpy()
  np.testing.assert_allclose(out.client_states[0]['offsets'], expected, rtol=1e-5, atol=1e-6)


def test_rows_follow_the_index_when_batches_are_shuffled(offsets):
  tf.keras.utils.set_random_seed(2)
  model = helpers.linear_model()
  x, y = helpers.random_client(4, 9)
  shuffled = helpers.client_dataset(x, y, batch_size=9).unbatch().shuffle(9, seed=5).batch(9)
  rows = np.zeros((9, _CLASSES), np.float32)
  out = offsets.next(_initial_state(offsets, model), [shuffled], [{'offsets': rows}])
  # Each sample's offset moves towards its own label, whatever position it was batched in.
  moved = out.client_states[0]['offsets']
  assert np.all(np.argmax(moved, axis=1) == y)


def test_hparams_reach_the_clients_and_live_in_the_state(offsets):
  tf.keras.utils.set_random_seed(3)
  model = helpers.linear_model()
  x, y = helpers.random_client(5, 8)
  rows = [{'offsets': np.zeros((8, _CLASSES), np.float32)}]
  state = _initial_state(offsets, model)
  assert float(offsets.get_hparams(state)['loss_scale']) == 1.0
  plain = offsets.next(state, [helpers.client_dataset(x, y)], rows)
  doubled_state = offsets.set_hparams(state, {'loss_scale': 2.0})
  doubled = offsets.next(doubled_state, [helpers.client_dataset(x, y)], rows)
  np.testing.assert_allclose(doubled.client_states[0]['offsets'],
                             2.0 * plain.client_states[0]['offsets'], rtol=1e-5)
  assert float(offsets.get_hparams(doubled.state)['loss_scale']) == 2.0
  with pytest.raises(ValueError, match='hparams'):
    offsets.set_hparams(state, {'scale': 2.0})


def test_non_finite_client_keeps_its_old_state(counting):
  tf.keras.utils.set_random_seed(4)
  model = helpers.linear_model()
  x, y = helpers.random_client(6, 4)
  x[0, 0] = np.nan
  state = counting.objective.initial_state(y)
  out = counting.next(_initial_state(counting, model), [helpers.client_dataset(x, y)], [state])
  assert int(out.client_states[0]['rounds']) == 0
  assert int(out.metrics['client_work']['train']['non_finite_clients']) == 1


@pytest.mark.slow
def test_weight_decay_and_model_losses_are_trained_on():
  x, y = helpers.random_client(7, 16)
  spec = helpers.client_dataset(x, y).element_spec
  sgd = tff.learning.optimizers.build_sgdm(0.5)

  def regularised():
    return tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(
        _CLASSES, kernel_regularizer=tf.keras.regularizers.L2(0.5), name='logits')])

  def kernel_norm(model_fn, **kwargs):
    process = process_lib.build_process(model_fn, spec, sgd, **kwargs)
    tf.keras.utils.set_random_seed(5)
    state = _initial_state(process, model_fn())
    out = process.next(state, [helpers.client_dataset(x, y)], [()])
    return float(np.sum(process.get_model_weights(out.state).trainable[0] ** 2))

  plain = kernel_norm(helpers.linear_model)
  assert kernel_norm(regularised) < 0.8 * plain  # The model's L2 loss is part of training.
  assert kernel_norm(helpers.linear_model, weight_decay=0.5) < 0.8 * plain


def test_probe_evaluates_the_global_model_without_training():
  x, y = helpers.random_client(8, 10)

  def own_label_accuracy(model, dataset):
    logits = probe.logits_of(model, dataset)
    labels = dataset.reduce(tf.zeros([0], tf.int64),
                            lambda acc, batch: tf.concat([acc, batch['y']], 0))
    return tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1), labels), tf.float32))

  spec = helpers.client_dataset(x, y).element_spec
  accuracy = probe.build_probe(helpers.linear_model, spec, own_label_accuracy)
  weights_type = client_work.weights_type_of(helpers.linear_model)
  assert accuracy.type_signature.parameter[0].member == weights_type
  assert accuracy.type_signature.result.placement is tff.CLIENTS
  tf.keras.utils.set_random_seed(6)
  model = helpers.linear_model()
  weights = tff.learning.models.ModelWeights(
      trainable=[v.numpy() for v in model.trainable_variables], non_trainable=[])
  datasets = [helpers.client_dataset(x, y, batch_size=3), helpers.client_dataset(x[:4], y[:4])]
  got = accuracy(weights, datasets)
  expected = np.mean(np.argmax(model(x).numpy(), -1) == y)
  assert got[0] == pytest.approx(expected)
  assert got[1] == pytest.approx(np.mean(np.argmax(model(x[:4]).numpy(), -1) == y[:4]))
  # The in-process probe (the tf and tflite runtimes) gives the same values.
  in_process = probe.build_probe(helpers.linear_model, spec, own_label_accuracy,
                                 in_process=True)
  assert in_process(weights, datasets) == [
      pytest.approx(got[0]), pytest.approx(got[1])]
