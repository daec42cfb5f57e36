"""Stacked clients train exactly as each client alone (``client_work.build_local_training``)."""
import numpy as np
import pytest
import tensorflow as tf

import models
from tff_noisy.federated import client_data
from tff_noisy.federated import client_work
from tff_noisy.methods.lsc import parts as contrastive
from tff_noisy.methods.fedefc import parts as forward_correction
from tff_noisy.methods.maskedoptim import parts as masked_optim
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy, Proximal
from tff_noisy.runtime import stacked
from tff_noisy.tff_runtime import import_tff

tff = import_tff()
SHAPE = (8, 8, 1)


def _fedavg():
  """FedAvg's client program: cross-entropy."""
  return ClientProgram([CrossEntropy()])

def _clients(sizes, batch_size, weighted=False):
  rng = np.random.default_rng(1)
  clients = []
  for i, n in enumerate(sizes):
    extra = {'aggregation_weight': rng.random(n).astype(np.float32)} if weighted else None
    clients.append(client_data.make_client_data(rng.random((n, *SHAPE)), rng.integers(0, 10, n),
                                                batch_size, 100 + i, extra))
  return clients


def _compare(model_name, optimizer, program, sizes, *, batch_size=8, epochs=2,
             weight_decay=0.0, weighted=False, tolerance=1e-6, hparams=None):
  tf.keras.utils.set_random_seed(0)
  model_fn = lambda: models.build_model(model_name, SHAPE, 10)  # pylint: disable=unnecessary-lambda-assignment
  model = model_fn()
  assert stacked.unstackable_reason(model, program) == ''
  weights = tf.nest.map_structure(lambda v: v.numpy() + 0.01,  # Not the model's own values.
                                  client_work.model_weights_of(model))
  clients = _clients(sizes, batch_size, weighted)
  alone = client_work.build_local_training(model_fn(), optimizer, program, epochs,
                                           weight_decay)
  together = stacked.build_stacked_training(model, optimizer, program, weight_decay)
  hparams = hparams or {}
  prologue_pass = stacked.prologue_pass(program, hparams)
  updates, sums, reported = together(weights, hparams, *stacked.stack_round(
      clients, batch_size, epochs, prologue_pass))
  scale = max(np.abs(w).max() for w in tf.nest.flatten(weights))
  for c, client in enumerate(clients):
    result, metrics, _ = alone(weights, client.dataset(), (), hparams)
    for name in program.metric_names:
      assert float(reported[name][c]) == pytest.approx(
          float(metrics[client_work.OBJECTIVE_METRICS_KEY][name]), rel=1e-6, abs=1e-6)
    for want, got in zip(tf.nest.flatten(result.update), tf.nest.flatten(updates)):
      np.testing.assert_allclose(got[c], want, atol=tolerance * scale, rtol=0)
    assert float(sums['weight_sum'][c]) / epochs == pytest.approx(
        float(result.update_weight), rel=1e-6)
    assert int(sums['num_examples'][c]) == int(metrics['num_examples'])
    assert float(sums['loss_sum'][c]) == pytest.approx(float(metrics['loss_sum']), rel=1e-5)
    assert float(sums['correct'][c]) == float(metrics['correct'])
  # A group also trains each client as it trains alone in a group of one.
  one, _, _ = together(weights, hparams, *stacked.stack_round(clients[-1:], batch_size,
                                                              epochs, prologue_pass))
  for got, want in zip(tf.nest.flatten(one), tf.nest.flatten(updates)):
    np.testing.assert_allclose(got[0], want[-1], atol=tolerance * scale, rtol=0)


def test_unequal_clients_with_momentum_fedprox_and_weight_decay():
  """An empty client, one smaller than the batch, one exactly a batch, ragged ones."""
  _compare('mlp', tff.learning.optimizers.build_sgdm(0.1, 0.9),
           ClientProgram([CrossEntropy(), Proximal(0.1)]), [0, 3, 8, 20, 17],
           weight_decay=1e-3, weighted=True)


def test_adam_counts_only_real_steps():
  """Adam divides by sqrt(v): a gradient near 0 that rounds differently (the stacked mean
  sums a padded batch) moves a weight by up to the learning rate: measured, 1 or 2 of
  8,192 weights differ by 5e-6 to 1.3e-5 of the largest weight after 8 steps."""
  _compare('mlp', tff.learning.optimizers.build_adam(0.01), _fedavg(), [2, 11, 30],
           batch_size=4, epochs=1, tolerance=3e-5)


def test_convolutional_model():
  _compare('pooled_cnn', tff.learning.optimizers.build_sgdm(0.05), _fedavg(),
           [5, 12], epochs=1)


@pytest.mark.parametrize('signal, corrected', [('global', 0), ('global', 1),
                                               ('training', 0), ('training', 1)])
def test_forward_correction_stacks_its_prologue(signal, corrected):
  """FedEFC's prologue (its clients' own transition matrices from the received model's
  logits, then the forward-corrected loss) in each phase: in the stacked call the
  received model runs on every client's examples at once, so logits, matrices and
  updates equal each client's alone to rounding."""
  program = ClientProgram([forward_correction.ForwardCorrection(10, signal=signal)])
  _compare('mlp', tff.learning.optimizers.build_sgdm(0.1, 0.9), program, [5, 20, 13],
           hparams={'corrected': np.int32(corrected)}, tolerance=1e-5)


def test_every_lifecycle_point_converts_under_autograph():
  """The traced step runs the parts' points through AutoGraph: a point it cannot convert
  (ClientPart's default start and finish, a docstring alone) runs as-is with a warning
  at every trace of every run."""
  part = CrossEntropy()  # Every point but its loss is ClientPart's default.
  for name in ('start', 'batch', 'loss', 'step', 'after_step', 'finish'):
    tf.autograph.to_graph(getattr(part, name))


def test_stack_round_draws_the_prologue_pass_first():
  clients = _clients([3, 5], batch_size=2)
  orders = client_data.batch_orders(clients, 3)
  batches, mask, first, first_mask = stacked.stack_round(clients, 2, 2, prologue_pass=True)
  for c, client in enumerate(clients):
    n = client.num_examples
    np.testing.assert_array_equal(first['index'][c][first_mask[c]], orders[c][:n])
    np.testing.assert_array_equal(batches['index'][c][mask[c]], orders[c][n:])
  batches, mask, _, first_mask = stacked.stack_round(clients, 2, 2, prologue_pass=False)
  assert first_mask.shape == (2, 0, 2)
  np.testing.assert_array_equal(batches['index'][1][mask[1]],
                                client_data.batch_orders(clients, 2)[1])


def test_stack_batches_pads_and_masks():
  clients = _clients([3, 5], batch_size=2)
  orders = client_data.batch_orders(clients, 2)
  batches, mask = stacked.stack_batches(clients, orders, 2, 2)
  assert mask.shape == (2, 6, 2)  # 5 examples: 3 batches a pass, 2 passes.
  assert mask[0].sum() == 6 and mask[1].sum() == 10
  assert mask[0].tolist() == [[1, 1], [1, 0], [1, 1], [1, 0], [0, 0], [0, 0]]
  np.testing.assert_array_equal(batches['index'][1][mask[1]], orders[1])
  assert not batches['x'][0][~mask[0]].any()


@pytest.mark.parametrize('model_name, options, program, reason', [
    ('resnet20', {'norm': 'batch'}, _fedavg(), 'BatchNormalization'),
    ('mnist_cnn', {}, _fedavg(), 'Dropout'),
    ('mlp', {}, ClientProgram([masked_optim.MaskedOptimLoss(10)]),
     'client part MaskedOptimLoss is not declared stackable'),
    ('mlp', {}, ClientProgram([CrossEntropy(), contrastive.KSimilarity(2, 0.5, 1.0)]),
     'client part KSimilarity is not declared stackable'),
])
def test_what_cannot_be_stacked_says_why(model_name, options, program, reason):
  shape = (28, 28, 1) if model_name == 'mnist_cnn' else SHAPE
  model = models.build_model(model_name, shape, 10, **options)
  assert reason in stacked.unstackable_reason(model, program)


def test_runs_that_train_alike_share_one_traced_step_and_train_as_their_own():
  """A second model of the same architecture (other layer names, other weights) gets the
  step already traced, which trains it exactly as a step traced for it alone; another
  width, optimiser setting or program setting gets its own."""
  def plain(width=16):  # Keras names its layers dense_1, dense_2, ... as they are built.
    return tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=SHAPE),
                                tf.keras.layers.Dense(width, activation='relu'),
                                tf.keras.layers.Dense(10)])

  sgd = tff.learning.optimizers.build_sgdm(0.1, momentum=0.9)
  first, second = plain(), plain()
  assert first.layers[-1].name != second.layers[-1].name
  shared = stacked.shared_stacked_training(first, sgd, _fedavg(), 1e-4)
  assert stacked.shared_stacked_training(
      second, tff.learning.optimizers.build_sgdm(0.1, momentum=0.9), _fedavg(),
      1e-4) is shared
  for other in [(plain(width=32), sgd, _fedavg(), 1e-4),
                (second, tff.learning.optimizers.build_sgdm(0.2, momentum=0.9),
                 _fedavg(), 1e-4),
                (second, sgd, ClientProgram([CrossEntropy(), Proximal(0.1)]), 1e-4),
                (second, sgd, _fedavg(), 0.0)]:
    assert stacked.shared_stacked_training(*other) is not shared
  own = stacked.build_stacked_training(second, sgd, _fedavg(), 1e-4)
  weights = tf.nest.map_structure(lambda v: v.numpy(), client_work.model_weights_of(second))
  batches = stacked.stack_round(_clients([5, 9], 4), 4, 2, False)
  for got, want in zip(tf.nest.flatten(shared(weights, {}, *batches)),
                       tf.nest.flatten(own(weights, {}, *batches))):
    np.testing.assert_array_equal(got, want)


def test_substitution_restores_the_variables():
  model = models.build_model('mlp', SHAPE, 10)
  values = tf.nest.map_structure(lambda v: tf.zeros_like(v),  # pylint: disable=unnecessary-lambda
                                 client_work.model_weights_of(model))
  x = np.ones((1, *SHAPE), np.float32)
  variables = list(model.variables)
  with stacked.substituted(model, values):
    assert not model(x).numpy().any()
  assert model(x).numpy().any()
  assert all(a is b for a, b in zip(model.variables, variables))
  assert len(model.variables) == len(variables)


@pytest.mark.slow
def test_residual_model_with_group_norm_and_weight_regularisation():
  """resnet20 (GroupNorm, L2 kernel regularizers): its losses apply to each client's weights."""
  model = models.build_model('resnet20', SHAPE, 10)
  assert len(stacked.weight_regularizers(model)) == len(model.losses) > 0
  _compare('resnet20', tff.learning.optimizers.build_sgdm(0.05), _fedavg(), [3, 6],
           batch_size=4, epochs=1)
