"""Client parts with state: the round trip, trainable per-example rows, hparams, probing;
and how a ``ClientProgram`` combines its parts (gradient terms, loss terms, declarations).

Toy parts only: a per-client round counter with a per-sample loss record (state out of
``finish``), learnable per-sample logit offsets (trainable rows), and a loss scale
decided by the server (hparams). Each checks one seam against hand-computed values.
"""
import collections

import numpy as np
import pytest
import tensorflow as tf

import helpers
from tff_noisy.federated import client_data
from tff_noisy.federated import client_work
from tff_noisy.federated import probe
from tff_noisy.federated import process as process_lib
from tff_noisy.federated.client_parts import (ClientContext, ClientPart, ClientProgram,
                                              CrossEntropy, DeviceForm, Needs, ON_DEVICE,
                                              Outputs, Proximal)
from tff_noisy.ops import losses
from tff_noisy.simulation import assembly
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
_CLASSES = 3


class Counting(ClientPart):
  """Counts a client's rounds and records each sample's loss under the trained model."""
  state_spec = {'rounds': tf.TensorSpec([], tf.int32),
                'last_loss': tf.TensorSpec([None], tf.float32)}

  def initial_state(self, labels):
    return {'rounds': np.int32(0), 'last_loss': np.zeros(len(labels), np.float32)}

  def finish(self, ctx):
    last_loss = ctx.state['last_loss']
    for batch in ctx.dataset:
      last_loss = tf.tensor_scatter_nd_update(
          last_loss, batch['index'][:, None],
          losses.cross_entropy(batch['y'], ctx.predict(batch['x'])))
    ctx.state.update(rounds=ctx.state['rounds'] + 1, last_loss=last_loss)


class Offsets(ClientPart):
  """Cross-entropy of logits + a learnable per-sample offset, the offsets' own GD step."""
  needs = Needs(rows='offsets')
  state_spec = {'offsets': tf.TensorSpec([None, _CLASSES], tf.float32)}
  hparams = {'loss_scale': np.float32(1.0)}
  row_lr = 10.0

  def initial_state(self, labels):
    return {'offsets': np.zeros((len(labels), _CLASSES), np.float32)}

  def loss(self, batch, out, ctx):
    return ctx.hparams['loss_scale'] * losses.cross_entropy(batch['y'], out.logits + out.rows)

  def after_step(self, weights, ctx):
    ctx.rows = ctx.rows - self.row_lr * ctx.row_grads
    return weights


def _initial_state(process, model):
  return assembly.initial_state(process, model)


def _process(parts):
  x, y = helpers.random_client(0, 4)
  return process_lib.build_process(helpers.linear_model,
                                   helpers.client_dataset(x, y).element_spec,
                                   tff.learning.optimizers.build_sgdm(0.1),
                                   program=ClientProgram(parts))


@pytest.fixture(scope='module')
def counting():
  return _process([CrossEntropy(), Counting()])


@pytest.fixture(scope='module')
def offsets():
  return _process([Offsets()])


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
  program = counting.program
  states = [program.initial_state(ya), program.initial_state(yb)]
  datasets = [helpers.client_data(xa, ya), helpers.client_data(xb, yb)]
  out = counting.next(_initial_state(counting, model), datasets, states)
  assert [int(s['rounds']) for s in out.client_states] == [1, 1]
  assert [s['last_loss'].shape for s in out.client_states] == [(7,), (5,)]
  # Only client a again: its counter moves, and its losses are those of its local model.
  out2 = counting.next(out.state, [helpers.client_data(xa, ya)], [out.client_states[0]])
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
  out = offsets.next(_initial_state(offsets, model), [helpers.client_data(x, y)],
                     [{'offsets': rows}])
  # One full batch: the rows' step uses the received model and the batch-mean loss.
  variable = tf.Variable(rows)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(losses.cross_entropy(y, model(x) + variable))
  expected = rows - Offsets.row_lr * tape.gradient(loss, variable).numpy()
  np.testing.assert_allclose(out.client_states[0]['offsets'], expected, rtol=1e-5, atol=1e-6)


def test_rows_follow_the_index_when_batches_are_shuffled(offsets):
  tf.keras.utils.set_random_seed(2)
  model = helpers.linear_model()
  x, y = helpers.random_client(4, 9)
  shuffled = client_data.make_client_data(x, y, 9, shuffle_seed=5)
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
  plain = offsets.next(state, [helpers.client_data(x, y)], rows)
  doubled_state = offsets.set_hparams(state, {'loss_scale': 2.0})
  doubled = offsets.next(doubled_state, [helpers.client_data(x, y)], rows)
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
  state = counting.program.initial_state(y)
  out = counting.next(_initial_state(counting, model), [helpers.client_data(x, y)], [state])
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
    out = process.next(state, [helpers.client_data(x, y)], [()])
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


# How a ClientProgram combines its parts, by hand on scalars.


class _Doubled(ClientPart):
  """Doubles the gradients it is given: a term whose place in the order shows."""

  def step(self, grads, weights, ctx):
    return [2.0 * g for g in grads]

  def after_step(self, weights, ctx):
    return [2.0 * w for w in weights]


class _PlusOne(ClientPart):
  """Adds one to the gradients and to the weights after the optimiser."""

  def step(self, grads, weights, ctx):
    return [g + 1.0 for g in grads]

  def after_step(self, weights, ctx):
    return [w + 1.0 for w in weights]


def _scalars(*values):
  return [tf.constant(v) for v in values]


def test_gradient_terms_are_proximal_then_weight_decay_then_the_other_parts_in_order():
  # Proximal is listed last but comes first; the other parts' terms keep their order.
  program = ClientProgram([_Doubled(), _PlusOne(), CrossEntropy(), Proximal(0.5)])
  ctx = ClientContext({}, initial_trainable=_scalars(1.0))
  grads = program.step(_scalars(1.0), _scalars(3.0), ctx, weight_decay=0.1)
  # 1 + 0.5 (3 - 1) = 2, + 0.1 * 3 = 2.3, doubled 4.6, plus one 5.6.
  assert float(grads[0]) == pytest.approx(5.6)
  grads = program.step(_scalars(1.0), _scalars(3.0), ctx, weight_decay=0.0)
  assert float(grads[0]) == pytest.approx(5.0)  # (1 + 1) * 2 + 1.
  reversed_order = ClientProgram([_PlusOne(), _Doubled(), CrossEntropy(), Proximal(0.5)])
  grads = reversed_order.step(_scalars(1.0), _scalars(3.0), ctx, weight_decay=0.1)
  assert float(grads[0]) == pytest.approx(6.6)  # (2.3 + 1) * 2.
  # After the optimiser the parts shift the weights in their order: 3 * 2 + 1.
  assert float(program.after_step(_scalars(3.0), ctx)[0]) == pytest.approx(7.0)


class _Term(ClientPart):
  """A fixed per-example loss term (None: no term); records that it was asked."""

  def __init__(self, name, values):
    self.name, self.values = name, values

  def loss(self, batch, out, ctx):
    ctx['asked'] = ctx['asked'] + [self.name]
    return None if self.values is None else tf.constant(self.values)


def test_loss_terms_are_summed_in_the_parts_order_and_none_gives_no_term():
  program = ClientProgram([_Term('a', [1.0, 2.0]), _Term('b', None), _Term('c', [10.0, 20.0])])
  ctx = ClientContext({}, values={'asked': []})
  total = program.loss({}, Outputs(tf.zeros([2, _CLASSES])), ctx)
  np.testing.assert_array_equal(total, [11.0, 22.0])
  assert ctx['asked'] == ['a', 'b', 'c']
  with pytest.raises(ValueError, match='no client part gives a loss term'):
    ClientProgram([_Term('b', None)]).loss({}, Outputs(tf.zeros([2, _CLASSES])),
                                           ClientContext({}, values={'asked': []}))


class _Declares(ClientPart):
  """State, hparams, device context (no on-device form: None) and needs as given."""

  def __init__(self, state=(), hparams=(), device_context=(), **needs):
    self.state_spec = {n: tf.TensorSpec([], tf.int32) for n in state}
    self.hparams = {n: np.float32(len(n)) for n in hparams}
    self.device = None if device_context is None else DeviceForm(
        context={n: np.zeros(2, np.float32) for n in device_context})
    self.needs = Needs(**needs)

  def initial_state(self, labels):
    return {n: np.int32(len(labels) + len(n)) for n in self.state_spec}


def test_declarations_are_merged_in_order_and_a_name_declared_twice_is_refused():
  program = ClientProgram([_Declares(['a'], ['h'], ['m'], metrics=('acc',),
                                     reference_models=('global',)),
                           CrossEntropy(),
                           _Declares(['bb'], ['gg'], ['n'], metrics=('rate',), rows='bb')])
  assert list(program.state_spec) == ['a', 'bb']
  assert dict(program.initial_state(np.zeros(3))) == {'a': 4, 'bb': 5}
  assert dict(program.hparams) == {'h': 1.0, 'gg': 2.0}
  assert list(program.device_context) == ['m', 'n']
  assert program.metric_names == ('acc', 'rate')
  assert program.reference_models == ('global',)
  assert program.rows == 'bb' and not program.uses_features
  for first, second, what in (
      (_Declares(state=['a']), _Declares(state=['a']), "client state 'a'"),
      (_Declares(hparams=['h']), _Declares(hparams=['h']), "hparam 'h'"),
      (_Declares(device_context=['m']), _Declares(device_context=['m']),
       "device context 'm'")):
    with pytest.raises(ValueError, match=f'two client parts declare the {what}'):
      ClientProgram([first, CrossEntropy(), second])
  with pytest.raises(ValueError, match='at most one client part may train per-example rows'):
    ClientProgram([_Declares(rows='a'), _Declares(rows='b')])
  with pytest.raises(ValueError, match='at least one client part'):
    ClientProgram([])
  with pytest.raises(TypeError, match='ClientPart instances'):
    ClientProgram([CrossEntropy(), losses.cross_entropy])


class _Shifted(_PlusOne):
  """Defines every point but declares nothing: not stackable, no on-device form."""

  def loss(self, batch, out, ctx):
    return losses.cross_entropy(batch['y'], out.logits)

  def finish(self, ctx):
    ctx.scale_update(0.5)


class _DeclaredShifted(_Shifted):
  needs = Needs(stackable=True)
  device = ON_DEVICE


def test_stackable_and_device_reasons_come_from_declarations_not_overrides():
  assert ClientProgram([CrossEntropy(), Proximal(1.0)]).unstackable_reason() == ''
  assert ClientProgram([CrossEntropy(), Proximal(1.0)]).device_reason() == ''
  undeclared = ClientProgram([CrossEntropy(), _Shifted(), Proximal(1.0)])
  assert undeclared.unstackable_reason() == (
      'client part _Shifted is not declared stackable (Needs.stackable)')
  assert undeclared.device_reason() == 'client part _Shifted has no on-device form'
  # The same overrides, declared: the program asks nothing of which points a part defines.
  declared = ClientProgram([_DeclaredShifted(), Proximal(1.0)])
  assert declared.unstackable_reason() == '' and declared.device_reason() == ''
  # On devices but not stackable, and the other way round: each reason stands alone.
  on_device = ClientProgram([_Declares()])
  assert on_device.unstackable_reason().startswith('client part _Declares is not declared')
  assert on_device.device_reason() == ''
  stackable = ClientProgram([_Declares(device_context=None, stackable=True)])
  assert stackable.unstackable_reason() == ''
  assert stackable.device_reason() == 'client part _Declares has no on-device form'


def test_device_start_and_metrics_run_every_part_with_a_device_form():
  class Accuracy(ClientPart):
    needs = Needs(metrics=('received_accuracy',))
    device = DeviceForm(context={'matrix': np.eye(2, dtype=np.float32)},
                        start=lambda predict, x, y, hparams: {
                            'matrix': predict(x), 'received_accuracy': np.float32(0.25)},
                        metrics=lambda outputs: {
                            'received_accuracy': float(outputs['received_accuracy'])})

  program = ClientProgram([CrossEntropy(), Accuracy()])
  outputs = program.device_start(lambda x: 2.0 * x, np.ones((2, 2), np.float32), None, {})
  np.testing.assert_array_equal(outputs['matrix'], 2.0 * np.ones((2, 2)))
  assert program.device_metrics(outputs) == {'received_accuracy': 0.25}
