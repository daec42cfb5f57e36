"""FedAvg (McMahan et al. 2017) composed from the shared client work and finalizer."""

from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from tff_noisy.federated import client_work as client_work_lib
from tff_noisy.federated import finalizer as finalizer_lib
from tff_noisy.federated.algorithms import base
from tff_noisy.tff_runtime import import_tff

tff = import_tff()


def build_fedavg_process(
    model_fn: Callable[[], tf.keras.Model],
    element_spec,
    client_optimizer,
    server_optimizer=None,
    *,
    model_aggregator=None,
    loss_fn: Optional[client_work_lib.LossFn] = None,
    proximal_strength: float = 0.0,
    local_epochs: int = 1,
):
  """Builds a FedAvg ``LearningProcess``.

  Args:
    model_fn: No-arg callable returning a new uncompiled Keras model with logits out.
    element_spec: Element spec of a (batched) client dataset.
    client_optimizer: A ``tff.learning.optimizers.Optimizer`` for local training.
    server_optimizer: Applied to the averaged update; default SGD with rate 1.0.
    model_aggregator: A weighted ``tff.aggregators`` factory; default weighted mean.
    loss_fn: Per-example loss (see ``client_work``); default cross-entropy.
    proximal_strength: FedProx mu; 0 is plain FedAvg.
    local_epochs: Local passes over each client's data per round.
  """
  weights_type = client_work_lib.weights_type_of(model_fn)
  server_optimizer = server_optimizer or tff.learning.optimizers.build_sgdm(1.0)
  model_aggregator = model_aggregator or tff.aggregators.MeanFactory()

  @tff.tensorflow.computation
  def initial_model_weights_fn():
    model = model_fn()
    return client_work_lib.model_weights_of(model)

  work = client_work_lib.build_client_work(
      model_fn, element_spec, client_optimizer, loss_fn=loss_fn,
      proximal_strength=proximal_strength, local_epochs=local_epochs)
  process = tff.learning.templates.compose_learning_process(
      initial_model_weights_fn,
      tff.learning.templates.build_broadcast_process(weights_type),
      work,
      model_aggregator.create(weights_type, tff.TensorType(np.float32)),
      finalizer_lib.build_model_finalizer(weights_type, server_optimizer),
  )
  client_work_lib.restore_eager_model_classes(model_fn)
  return process


class FedAvg(base.Method):

  @classmethod
  def build(cls, params, model_fn, element_spec, client_optimizer, server_optimizer, *,
            local_epochs, seed, rounds):
    del params, seed, rounds
    return cls(build_fedavg_process(model_fn, element_spec, client_optimizer,
                                    server_optimizer, local_epochs=local_epochs))
