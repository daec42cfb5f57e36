"""FedLN's AKD: the k-NN noise estimate and its threshold, the embedding MAE and the
distillation loss by hand, the TensorFlow twin and its gradient against NumPy."""
import numpy as np
import pytest
import tensorflow as tf

from tff_noisy.ops import akd
from tff_noisy.ops import akd_tf

# Two clusters on a line; k = 3 with the point itself: every point's neighbours are its
# own cluster. Cluster {0, 0.1, 0.2} has labels (0, 0, 1): its vote is 0 for all three,
# so the third label disagrees; cluster {10, 10.1, 10.2} is all 1. n̂ = 1/6.
EMBEDDINGS = np.array([[0.0], [0.1], [0.2], [10.0], [10.1], [10.2]])
LABELS = np.array([0, 0, 1, 1, 1, 1])


def test_noise_estimate_by_hand():
  assert akd.knn_noise_estimate(EMBEDDINGS, LABELS, k=3) == pytest.approx(1 / 6)
  # 1/6 is below a threshold of 0.2: the estimate is 0 and the client does not distil.
  assert akd.knn_noise_estimate(EMBEDDINGS, LABELS, k=3, threshold=0.2) == 0.0
  assert akd.distils(1 / 6) and not akd.distils(0.0)
  # Clean labels: no disagreement.
  assert akd.knn_noise_estimate(EMBEDDINGS, [0, 0, 0, 1, 1, 1], k=3) == 0.0
  with pytest.raises(ValueError):
    akd.knn_noise_estimate(EMBEDDINGS, LABELS, k=3, threshold=1.5)


def test_embedding_mae_and_loss_by_hand():
  # |(1, −1, 0, 2) − 0| averaged over D = 4: 1.
  np.testing.assert_allclose(akd.embedding_mae([[1.0, -1.0, 0.0, 2.0]], [[0.0] * 4]), [1.0])
  # Logits (0, log 3): p = (1/4, 3/4); label 1: CE = log(4/3); α = 10: + 10·1.
  logits = np.array([[0.0, np.log(3.0)]])
  student, teacher = [[1.0, -1.0, 0.0, 2.0]], [[0.0] * 4]
  np.testing.assert_allclose(akd.akd_loss(logits, [1], student, teacher),
                             [np.log(4 / 3) + 10.0])
  np.testing.assert_allclose(akd.akd_loss(logits, [1], student, teacher, distil=False),
                             [np.log(4 / 3)])
  np.testing.assert_allclose(akd.akd_loss(logits, [1], student, teacher, alpha=0.5),
                             [np.log(4 / 3) + 0.5])


def test_fedavg_weights_by_hand():
  np.testing.assert_allclose(akd.fedavg_weights([1, 3]), [0.25, 0.75])


@pytest.mark.parametrize('distil', [True, False])
def test_the_tensorflow_twin_equals_numpy(distil):
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(5, 4)).astype(np.float32)
  labels = rng.integers(0, 4, 5)
  student = rng.normal(size=(5, 8)).astype(np.float32)
  teacher = rng.normal(size=(5, 8)).astype(np.float32)
  np.testing.assert_allclose(
      akd_tf.akd_loss(labels, tf.constant(logits), tf.constant(student), tf.constant(teacher),
                      distil=tf.constant(distil)),
      akd.akd_loss(logits, labels, student, teacher, distil=distil), rtol=1e-5)


def test_the_gradient_reaches_the_head_only_through_the_embedding():
  # Batch of one, D = 4: ∂(α mean_d |e_d − g_d|)/∂e = α sign(e − g) / D = 2.5 (1, −1, 1, 1);
  # the teacher gets none, and CE's gradient in the logits is p − e_ŷ = (1/4, −1/4).
  student = tf.Variable([[1.0, -1.0, 0.5, 2.0]])
  teacher = tf.Variable([[0.0, 0.0, 0.0, 0.0]])
  logits = tf.Variable([[0.0, np.log(3.0)]], dtype=tf.float32)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(akd_tf.akd_loss([1], logits, student, teacher))
  g_student, g_teacher, g_logits = tape.gradient(loss, [student, teacher, logits])
  np.testing.assert_allclose(g_student, [[2.5, -2.5, 2.5, 2.5]], rtol=1e-6)
  assert g_teacher is None
  np.testing.assert_allclose(g_logits, [[0.25, -0.25]], rtol=1e-6)
