"""One builder per method; ``build_process`` picks it by the config's method name."""

from tff_noisy.federated.algorithms.fedavg import build_fedavg_process
from tff_noisy.federated.algorithms.fedprox import build_fedprox_process

_BUILDERS = {
    'fedavg': build_fedavg_process,
    'fedprox': build_fedprox_process,
}


def build_process(method: str, params: dict, model_fn, element_spec, client_optimizer,
                  server_optimizer, *, local_epochs: int):
  """Builds the ``LearningProcess`` of ``method`` with resolved ``params``."""
  return _BUILDERS[method](model_fn, element_spec, client_optimizer, server_optimizer,
                           local_epochs=local_epochs, **params)
