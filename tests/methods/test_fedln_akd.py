"""FedLN-AKD: the client model's representation head, the distillation term by hand on a
toy model, the clients' distillation flags, and a short digits run through the driver
(tf; equal on tff, slow)."""
import numpy as np
import pytest
import tensorflow as tf

import models
from tests import helpers
from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated.client_parts import ClientProgram, CrossEntropy, Outputs
from tff_noisy.methods.fedln_akd import model as akd_model
from tff_noisy.methods.fedln_akd import parts
from tff_noisy.ops import akd

_INPUTS, _FEATURES, _CLASSES, _WIDTH = 3, 2, 2, 4


def _model_fn():
  inputs = tf.keras.Input((_INPUTS,))
  features = tf.keras.layers.Dense(_FEATURES, activation='tanh')(inputs)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(_CLASSES, name='logits')(features))


def test_the_head_sits_beside_the_classifier_on_the_pooled_features():
  tf.keras.utils.set_random_seed(0)
  model = akd_model.akd_model(_model_fn, _WIDTH)()
  # The base's two Dense layers plus the head: six trainable arrays, the head's [2, 4], [4].
  shapes = [tuple(v.shape) for v in model.trainable_variables]
  assert sorted(shapes) == sorted([(3, 2), (2,), (2, 4), (4,), (2, 2), (2,)])
  x = np.array([[0.5, -1.0, 2.0]], np.float32)
  features, logits = models.features_and_logits(model)(x)
  assert features.shape == (1, _FEATURES + _WIDTH)
  phi, e = features[:, :_FEATURES], features[:, _FEATURES:]
  head = model.get_layer(akd_model.HEAD)
  np.testing.assert_allclose(e, phi @ head.kernel + head.bias, rtol=1e-6)
  # The logits are the classifier on φ alone: changing the head leaves them.
  head.kernel.assign(head.kernel + 1.0)
  np.testing.assert_allclose(model(x), logits, rtol=1e-6)
  classifier = model.get_layer(models.LOGITS_LAYER).dense
  np.testing.assert_allclose(logits, phi @ classifier.kernel + classifier.bias, rtol=1e-6)


def test_the_distillation_term_by_hand():
  # Features [φ | e] with F = 2, D = 4; teacher g. Example 1: |e − g| = (1, 1, 0, 2),
  # mean 1; example 2: |(0.5, 0, 0, −0.5) − 0| mean 0.25. α = 10 on a distilling client:
  # (10, 2.5); on a client that does not distil: (0, 0).
  features = tf.constant([[9.0, 9.0, 1.0, -1.0, 0.0, 2.0],
                          [9.0, 9.0, 0.5, 0.0, 0.0, -0.5]])
  teacher = tf.constant([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
  part = parts.EmbeddingDistillation(10.0)
  out = Outputs(logits=tf.zeros([2, 2]), features=features)
  for flag, want in ((1.0, [10.0, 2.5]), (0.0, [0.0, 0.0])):
    batch = {parts.EMBEDDING_KEY: teacher, parts.DISTIL_KEY: tf.constant([flag, flag])}
    np.testing.assert_allclose(part.loss(batch, out, None), want, rtol=1e-6)
  # Beside CE it is akd.akd_loss (the NumPy reference).
  logits = np.array([[0.0, np.log(3.0)], [1.0, 0.0]], np.float32)
  batch = {parts.EMBEDDING_KEY: teacher, parts.DISTIL_KEY: tf.ones([2]),
           'y': tf.constant([1, 0], tf.int64)}
  out = Outputs(logits=tf.constant(logits), features=features)
  total = CrossEntropy().loss(batch, out, None) + part.loss(batch, out, None)
  np.testing.assert_allclose(total, akd.akd_loss(logits, [1, 0], features.numpy()[:, 2:],
                                                 teacher.numpy()), rtol=1e-6)
  with pytest.raises(ValueError, match="'akd_distil'"):
    part.loss({parts.EMBEDDING_KEY: teacher}, out, None)


def test_the_gradient_reaches_the_backbone_and_the_head_but_not_the_classifier():
  tf.keras.utils.set_random_seed(1)
  model = akd_model.akd_model(_model_fn, _WIDTH)()
  program = ClientProgram([parts.EmbeddingDistillation(1.0)])
  assert program.uses_features
  feature_model = models.features_and_logits(model)
  x = tf.constant(np.random.default_rng(0).normal(size=(5, _INPUTS)), tf.float32)
  batch = {parts.EMBEDDING_KEY: tf.ones([5, _WIDTH]), parts.DISTIL_KEY: tf.ones([5])}
  with tf.GradientTape() as tape:
    features, logits = feature_model(x, training=True)
    loss = tf.reduce_mean(program.parts[0].loss(batch, Outputs(logits, features), None))
  grads = tape.gradient(loss, model.trainable_variables)
  moved = {v.name.split('/')[0]: g is not None and float(tf.reduce_max(tf.abs(g))) > 0
           for v, g in zip(model.trainable_variables, grads)}
  assert moved[akd_model.HEAD]
  assert not any(moved[n] for n in moved if n == models.LOGITS_LAYER)
  assert any(moved[n] for n in moved if n not in (akd_model.HEAD, models.LOGITS_LAYER))


@pytest.mark.parametrize('params, match', [
    ({'alpha': -1.0}, r'^method.params.alpha: needs a number >= 0, got -1.0$'),
    ({'neighbors': 0}, r'^method.params.neighbors: needs an integer >= 1, got 0$'),
    ({'noise_threshold': 1.5}, r'^method.params.noise_threshold: needs a number in '
                               r'\[0, 1\], got 1.5$'),
])
def test_bad_parameters_are_one_line_errors(params, match):
  with pytest.raises(ConfigError, match=match):
    methods.resolve_params('fedln_akd', params, rounds=10)


def test_the_defaults_are_the_codes():
  params = methods.resolve_params('fedln_akd', {}, rounds=10)
  assert (params.alpha, params.neighbors, params.noise_threshold) == (10.0, 10, 0.15)
  assert (akd.ALPHA, akd.NEIGHBORS, akd.NOISE_THRESHOLD) == (10.0, 10, 0.15)


def _digits(runtime='tf', **params):
  return helpers.small_digits_config('fedln_akd', runtime,
                                     dict(encoder='pca', pca_components=8, **params), rounds=3)


def test_a_digits_run_distils_on_the_noisy_clients_and_is_not_fedavg(tmp_cache):
  del tmp_cache
  simulation = helpers.run_rounds(_digits())
  history = simulation.history
  assert all(np.isfinite(r['train_loss']) for r in history)
  cids = simulation.data.client_ids
  # The flags the clients train with are those of the k-NN estimate on their embeddings.
  flags = {}
  for index, cid in enumerate(cids):
    embeddings = simulation.store.get(cid, parts.EMBEDDING_KEY)
    assert embeddings.shape == (len(simulation.data.y[cid]), 8)
    estimate = akd.knn_noise_estimate(embeddings, simulation.data.y[cid], 10, 0.15,
                                      seed=simulation.config.seed * 100003 + index,
                                      num_classes=simulation.data.num_classes)
    flags[cid] = akd.distils(estimate)
    assert float(simulation.store.get(cid, parts.DISTIL_KEY)) == float(flags[cid])
  assert any(flags.values())  # Half the clients have 40% symmetric noise.
  # The final model has the head [16, 8] beside the MLP's arrays.
  assert any(np.shape(w) == (16, 8) for w in simulation.final_weights())
  fedavg = helpers.run_rounds(helpers.small_digits_config('fedavg', rounds=3))
  assert abs(history[0]['train_loss'] - fedavg.history[0]['train_loss']) > 0.05
  shared = [w for w in simulation.final_weights() if np.shape(w) not in ((16, 8), (8,))]
  assert [np.shape(w) for w in shared] == [np.shape(w) for w in fedavg.final_weights()]
  assert helpers.max_difference(shared, fedavg.final_weights()) > 1e-3  # The term moved them.
  # alpha = 0: the head is trained by nothing, the classifier and backbone as FedAvg's.
  plain = helpers.run_rounds(_digits(alpha=0.0))
  assert plain.history[-1]['test_accuracy'] == pytest.approx(
      fedavg.history[-1]['test_accuracy'], abs=1e-6)


@pytest.mark.slow
def test_fedln_akd_runs_equally_on_tff_and_tf(tmp_cache):
  del tmp_cache
  runs = {runtime: helpers.run_rounds(_digits(runtime)) for runtime in ('tff', 'tf')}
  assert helpers.max_difference(runs['tff'].final_weights(), runs['tf'].final_weights()) < 1e-5
  for want, got in zip(runs['tff'].history, runs['tf'].history):
    assert got['train_loss'] == pytest.approx(want['train_loss'], rel=1e-5)


def test_report_section_scores_the_estimates_and_the_distilling_clients():
  from tff_noisy import reporting
  from tff_noisy.methods.fedln_akd.report import NoiseEstimateSection
  truth = {'flagged': 2, 'truly_noisy': 1, 'precision': 0.5, 'recall': 1.0}
  results = {'extra': {'noise_estimates': {'a': 0.0, 'b': 0.4, 'c': 0.2},
                       'true_noise_rates': {'a': 0.0, 'b': 0.5, 'c': 0.0},
                       'noisy_clients': 2, 'detection_truth': truth}}
  section = NoiseEstimateSection()
  (estimate,) = section.estimates(results)
  assert estimate.values == {'a': 0.0, 'b': 0.4, 'c': 0.2} and estimate.diagonal
  (line,) = section.summary(results)
  assert line.endswith('2 flagged, 1 truly noisy; precision 0.500, recall 1.000')
  w = reporting.Writer('.')
  section.render(w, {None: {'fedln_akd': [reporting.Run('.', 'fedln_akd', None, 3, results)]}})
  assert w.lines[0] == "## FedLN-AKD's distilling clients against the truth"
  assert w.lines[-2].startswith('| fedln_akd | seed 3 | flagged 2, truly_noisy 1, precision')
  assert section.estimates({'rounds': []}) == [] and section.summary({}) == []
