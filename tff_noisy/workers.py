"""TFF worker servers: ``tff-noisy worker`` and the ``--workers host:port,...`` option.

A worker is the C++ ``worker_binary`` that ships in the TFF wheel: TFF's executor service
on one gRPC port of every interface (the binary takes no address to bind). :func:`serve`
runs one until SIGINT or SIGTERM. :func:`parse_workers` and :func:`check_workers` turn
``--workers`` into addresses that answer, before any data or model is built;
``tff_noisy.remote`` runs a run's computations on them.

TensorFlow-free, so the command line checks ``--workers`` before TensorFlow loads.
"""

import importlib.util
import os
import signal
import socket
import time
from typing import List, Sequence

from tff_noisy import errors
from tff_noisy import tff_runtime

# How long a worker has to answer before it counts as unreachable.
CONNECT_TIMEOUT = 5.0
_START_TIMEOUT = 30.0  # For `tff-noisy worker`: the binary listening on its port.


class WorkersError(errors.UserError):
  """``--workers`` names something that is not a reachable TFF worker."""


class WorkerLost(errors.UserError):
  """A worker stopped answering during a run; ``workers`` names every one that did."""

  def __init__(self, workers: Sequence[str], reason: str):
    self.workers = list(workers)
    self.reason = reason
    names = ', '.join(self.workers)
    plural = 's' if len(self.workers) > 1 else ''
    super().__init__(
        f'TFF worker{plural} {names} stopped answering ({reason}); every completed round '
        'is in the run\'s checkpoints: restart the worker (tff-noisy worker --port PORT) '
        'or leave it out of --workers, and continue with --resume')


def worker_binary() -> str:
  """Path of the ``worker_binary`` in the installed TFF wheel (without importing TFF)."""
  spec = importlib.util.find_spec('tensorflow_federated')
  path = os.path.join(os.path.dirname(spec.origin), 'data', 'worker_binary')
  if not os.path.isfile(path):
    raise errors.UserError(f'the TFF wheel has no worker binary at {path}')
  return path


def parse_workers(text: str) -> List[str]:
  """``host:port`` addresses of a comma-separated ``--workers`` value, in order.

  Raises:
    WorkersError: an entry is not ``host:port`` with a port in 1-65535, or is repeated.
  """
  addresses = [entry.strip() for entry in text.split(',')]
  for i, address in enumerate(addresses):
    host, colon, port = address.rpartition(':')
    if not (colon and host and port.isdigit()):
      raise WorkersError(f'--workers: {address!r} is not host:port (e.g. '
                         '10.0.0.2:7000,10.0.0.3:7000)')
    if not 1 <= int(port) <= 65535:
      raise WorkersError(f'--workers: {address!r}: port {port} is not in 1-65535')
    if address in addresses[:i]:
      raise WorkersError(f'--workers: {address!r} is named twice')
  return addresses


def unanswered(addresses: Sequence[str], timeout: float = CONNECT_TIMEOUT) -> List[str]:
  """The addresses whose gRPC server does not answer within ``timeout`` seconds."""
  import grpc  # pylint: disable=g-import-not-at-top
  channels = [grpc.insecure_channel(address) for address in addresses]
  futures = [grpc.channel_ready_future(channel) for channel in channels]  # All at once.
  deadline = time.monotonic() + timeout
  silent = []
  try:
    for address, future in zip(addresses, futures):
      try:
        future.result(timeout=max(0.0, deadline - time.monotonic()))
      except grpc.FutureTimeoutError:
        silent.append(address)
        future.cancel()
  finally:
    for channel in channels:
      channel.close()
  return silent


# An executor-service call without effect: disposing of no values. A TFF worker answers
# it; another gRPC server answers UNIMPLEMENTED.
_NO_OP_CALL = '/tensorflow_federated.v0.ExecutorGroup/Dispose'


def not_tff_workers(addresses: Sequence[str], timeout: float = CONNECT_TIMEOUT) -> dict:
  """``{address: why}`` of the answering gRPC servers that are not TFF workers."""
  import grpc  # pylint: disable=g-import-not-at-top
  foreign = {}
  for address in addresses:
    with grpc.insecure_channel(address) as channel:
      try:
        channel.unary_unary(_NO_OP_CALL)(b'', timeout=timeout)
      except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # A busy worker may time out.
          foreign[address] = f'{e.code().name}: {e.details()}'
  return foreign


def check_workers(addresses: Sequence[str], timeout: float = CONNECT_TIMEOUT) -> None:
  """Raises WorkersError naming every worker that does not answer within ``timeout``, or
  that answers but is another gRPC server than TFF's executor service."""
  silent = unanswered(addresses, timeout)
  if silent:
    raise WorkersError(
        f"--workers: no TFF worker answers at {', '.join(silent)} (waited {timeout:g} s); "
        'start one on each machine with `tff-noisy worker --port PORT`')
  foreign = not_tff_workers(addresses, timeout)
  if foreign:
    named = '; '.join(f'{address} ({why})' for address, why in foreign.items())
    raise WorkersError(
        f'--workers: a gRPC server answers but it is not a TFF worker: {named}; start '
        '`tff-noisy worker --port PORT` there, or name the port a worker listens on')


# ``--host`` values that mean what the binary does: listen on every interface.
EVERY_INTERFACE = ('0.0.0.0', '::', '*')


def serve(port: int, max_concurrent_calls: int = -1, host: str = '0.0.0.0') -> None:
  """Runs a TFF worker on ``port`` (every interface) until SIGINT or SIGTERM.

  Args:
    port: TCP port, 1-65535.
    max_concurrent_calls: Most parallel calls of one computation (clients trained at
      once); 0 or less: no limit.
    host: Only one of ``EVERY_INTERFACE``: the binary takes no address to bind.

  Raises:
    UserError: a bad port or host, a port in use, or the worker exited by itself.
  """
  if host not in EVERY_INTERFACE:
    raise errors.UserError(
        f"--host: {host!r} cannot be honoured: TFF 0.87's worker_binary takes only a port "
        f"and listens on every interface (--host {' | '.join(EVERY_INTERFACE)}); to keep "
        'a worker private, open its port only to the driver (firewall) or reach it through '
        'an SSH tunnel (docs/guide.md: Running on several machines)')
  if not 1 <= port <= 65535:
    raise errors.UserError(f'--port: {port} is not in 1-65535')
  _check_port_free(port)
  process = tff_runtime.WorkerPopen([
      worker_binary(), f'--port={port}',
      f'--max_concurrent_computation_calls={max_concurrent_calls}'])
  stopping = []

  def stop(signum, _):
    stopping.append(signum)
    if process.poll() is None:  # SIGTERM: a shell's background job ignores SIGINT.
      process.send_signal(signal.SIGTERM)

  previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
  try:
    if _wait_listening(process, port):
      print(f'{errors.PROG} worker: TFF worker (pid {process.pid}) listening on port {port} '
            'of every interface; Ctrl-C or SIGTERM stops it', flush=True)
    status = process.wait()
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)
    if process.poll() is None:  # An exception in this function: never leave it behind.
      process.kill()
      process.wait()
  if not stopping:
    raise errors.UserError(f'worker: the TFF worker on port {port} exited with status '
                           f'{status}')
  print(f'{errors.PROG} worker: stopped', flush=True)


def _check_port_free(port: int) -> None:
  """Raises UserError if ``port`` is taken (a worker shares a port with another gRPC
  server, which the kernel would then hand connections to in turn)."""
  try:
    probe, address = socket.socket(socket.AF_INET6), ('::', port)  # IPv4 too.
  except OSError:  # No IPv6 on this machine.
    probe, address = socket.socket(socket.AF_INET), ('0.0.0.0', port)
  with probe:
    try:
      probe.bind(address)
    except OSError as e:
      raise errors.UserError(f'worker: port {port} is in use ({e.strerror})') from None


def _wait_listening(process, port: int) -> bool:
  """Waits until ``port`` accepts connections; False if the worker exited first."""
  deadline = time.monotonic() + _START_TIMEOUT
  while process.poll() is None and time.monotonic() < deadline:
    try:
      socket.create_connection(('127.0.0.1', port), timeout=1.0).close()
      return True
    except OSError:
      time.sleep(0.1)
  return False
