"""Client runtimes: where a round's clients train (``fl.client_runtime``).

| runtime    | clients train in                              | remote workers |
|------------|-----------------------------------------------|----------------|
| ``tff``    | TFF's C++ ``worker_binary`` (CPU only)         | yes            |
| ``tf``     | this process's TensorFlow (GPU when it sees   | no             |
|            | one), many clients per graph call when exact  |                |
| ``tflite`` | the TFLite interpreter (on-device model)      | no             |

Every runtime runs the same client kernel (``client_work.build_local_training``; the
TFLite export compiles its step and upload, ``client_step``, into its signatures) and feeds the
process's one round (``FederatedProcess.next``): the configured aggregator and finalizer.
With ``tff`` the aggregator runs in TFF's worker; with ``tf`` and ``tflite`` the clients'
updates are already in this process, and a stateless aggregator with an in-process form
(mean, coordinate median, trimmed mean, Krum) aggregates them here, in one graph call;
the geometric medians still run in TFF's worker. ``build`` returns what
``process.build_process`` takes: ``None`` for TFF's own client work, else
``program -> runtime`` (a method's ``ClientProgram``).
"""

from typing import Callable, Optional

from tff_noisy.config import AUTO_RUNTIME, CLIENT_RUNTIMES


def build(name: str, *, model_fn, client_optimizer, local_epochs: int, weight_decay: float,
          batch_size: int, faults: bool = False,
          clients_per_call: Optional[int] = None,
          stack_clients: Optional[bool] = None,
          median_client_steps: Optional[int] = None) -> Optional[Callable]:
  """The client-runtime factory of ``fl.client_runtime: name`` (``None``: TFF's); the name
  was checked with the config and resolved (``config.resolve_client_runtime``)."""
  if name == AUTO_RUNTIME:
    raise ValueError(f'client runtime {name!r}: resolve it first (tff, tf or tflite)')
  CLIENT_RUNTIMES.lookup(name)
  if name == 'tff':
    return None
  if name == 'tf':
    from tff_noisy.runtime import tf_clients  # pylint: disable=g-import-not-at-top
    return lambda program: tf_clients.InProcessClients(
        model_fn, client_optimizer, program, local_epochs=local_epochs,
        weight_decay=weight_decay, batch_size=batch_size, clients_per_call=clients_per_call,
        stack=stack_clients, median_client_steps=median_client_steps)
  from tff_noisy.runtime import tflite_clients  # pylint: disable=g-import-not-at-top
  return lambda program: tflite_clients.TFLiteClients(
      model_fn, client_optimizer, program, local_epochs=local_epochs,
      weight_decay=weight_decay, faults=faults)


def describe(process, on_workers: bool = False) -> dict:
  """What results.json keeps of where a process's clients trained.

  ``on_workers``: the run's TFF computations go to remote workers (``--workers``, only
  with ``tff``): each worker trains and aggregates its group of clients, and this process
  merges the groups' partial aggregates (``remote.on_workers``).
  """
  if on_workers:
    return {'client_runtime': 'tff', 'clients_trained_on': 'TFF remote workers (CPU)',
            'aggregated_in': 'TFF remote workers, groups merged in this process'}
  if process.clients is None:
    record = {'client_runtime': 'tff', 'clients_trained_on': 'TFF worker_binary (CPU)'}
  else:
    record = process.clients.describe()
  return dict(record, aggregated_in=process.aggregated_in())
