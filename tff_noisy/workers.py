"""TFF worker servers: ``tff-noisy worker`` and the ``--workers host:port,...`` option.

A worker is the C++ ``worker_binary`` that ships in the TFF wheel: TFF's executor service
on one gRPC port of every interface (the binary takes no address to bind), running any
computation it is sent. :func:`serve` runs one until SIGINT or SIGTERM, confined to a
private network namespace behind a front on the address the user gives (loopback by
default; ``tff_noisy.worker_front``) that speaks mutual TLS (``tff_noisy.worker_tls``).
Without certificates it serves only with ``--insecure``: plain on loopback behind the
front, or the bare binary on every interface.
:func:`parse_workers` and :func:`check_workers` turn ``--workers`` into addresses that
answer, before any data or model is built; :func:`channel` dials one (with the driver's
certificates when ``$TFF_NOISY_WORKER_CERTS`` is set); ``tff_noisy.remote`` runs a run's
computations on them.

TensorFlow-free, so the command line checks ``--workers`` before TensorFlow loads.
"""

import ctypes
import importlib.util
import os
import pwd
import signal
import socket
import ssl
import subprocess
import sys
import time
from typing import List, Optional, Sequence

from tff_noisy import errors
from tff_noisy import tff_runtime
from tff_noisy import worker_front
from tff_noisy import worker_tls

# How long a worker has to answer before it counts as unreachable.
CONNECT_TIMEOUT = 5.0
_START_TIMEOUT = 30.0  # For `tff-noisy worker`: the binary listening on its port.
_PR_SET_PDEATHSIG = 1


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
        "is in the run's checkpoints: restart the worker (tff-noisy worker --port PORT "
        '--certs DIR) or leave it out of --workers, and continue with --resume')


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


def channel(address: str, options: Sequence = ()):
  """A gRPC channel to the worker at ``address``: a secure channel with the client
  certificate of ``$TFF_NOISY_WORKER_CERTS`` when it is set, else a plain one."""
  import grpc  # pylint: disable=g-import-not-at-top
  files = worker_tls.driver_files()
  if files:
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(**files), options)
  return grpc.insecure_channel(address, options)


def unanswered(addresses: Sequence[str], timeout: float = CONNECT_TIMEOUT) -> List[str]:
  """The addresses whose gRPC server does not answer within ``timeout`` seconds."""
  import grpc  # pylint: disable=g-import-not-at-top
  channels = [channel(address) for address in addresses]
  futures = [grpc.channel_ready_future(c) for c in channels]  # All at once.
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
    for c in channels:
      c.close()
  return silent


# An executor-service call without effect: disposing of no values. A TFF worker answers
# it; another gRPC server answers UNIMPLEMENTED.
_NO_OP_CALL = '/tensorflow_federated.v0.ExecutorGroup/Dispose'


def not_tff_workers(addresses: Sequence[str], timeout: float = CONNECT_TIMEOUT) -> dict:
  """``{address: why}`` of the answering gRPC servers that are not TFF workers."""
  import grpc  # pylint: disable=g-import-not-at-top
  foreign = {}
  for address in addresses:
    with channel(address) as open_channel:
      try:
        open_channel.unary_unary(_NO_OP_CALL)(b'', timeout=timeout)
      except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # A busy worker may time out.
          foreign[address] = f'{e.code().name}: {e.details()}'
  return foreign


def check_workers(addresses: Sequence[str], timeout: float = CONNECT_TIMEOUT) -> None:
  """Raises WorkersError naming every worker that does not answer within ``timeout`` (and
  why, when TLS is the reason), or that answers but is another gRPC server than TFF's
  executor service."""
  worker_tls.driver_files()  # A bad $TFF_NOISY_WORKER_CERTS, before any connection.
  silent = unanswered(addresses, timeout)
  reasons = [why for why in (_why_silent(a, timeout) for a in silent) if why]
  if reasons:
    raise WorkersError('--workers: ' + '; '.join(reasons))
  if silent:
    raise WorkersError(
        f"--workers: no TFF worker answers at {', '.join(silent)} (waited {timeout:g} s); "
        'start one on each machine with `tff-noisy worker --port PORT --certs DIR`')
  foreign = not_tff_workers(addresses, timeout)
  if foreign:
    named = '; '.join(f'{address} ({why})' for address, why in foreign.items())
    raise WorkersError(
        f'--workers: a gRPC server answers but it is not a TFF worker: {named}; start '
        '`tff-noisy worker --port PORT --certs DIR` there, or name the port a worker '
        'listens on')


def _why_silent(address: str, timeout: float) -> Optional[str]:
  """Why a worker that accepts TCP connections does not answer gRPC, when TLS is the
  reason: it wants a client certificate this driver lacks, refuses this one, shows one
  the driver's authority did not sign, or speaks no TLS to a driver with certificates.
  None otherwise (nothing listens, or something else is wrong)."""
  host, _, port = address.rpartition(':')
  host = host.strip('[]')
  try:
    connection = socket.create_connection((host, int(port)), timeout=timeout)
  except OSError:
    return None
  try:
    return _tls_reason(connection, address, host, timeout)
  finally:
    connection.close()


def _tls_reason(connection, address: str, host: str, timeout: float) -> Optional[str]:
  """``_why_silent`` over an open ``connection``."""
  env = worker_tls.CERTS_ENV
  if not os.environ.get(env):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
      context.wrap_socket(connection, server_hostname=host).close()
    except OSError:  # ssl.SSLError too: no TLS server.
      return None
    return (f'{address} is a TLS worker that takes only drivers with a client certificate '
            f'of its authority: set ${env} to a directory with its ca.pem, client.pem and '
            'client.key (`tff-noisy worker certs DIR` wrote them)')
  try:
    with worker_tls.driver_context().wrap_socket(connection, server_hostname=host) as tls:
      tls.settimeout(min(timeout, 2.0))
      # A worker sends its HTTP/2 settings first; one that refused the certificate closes.
      if not tls.recv(1):
        return (f"{address} refused this driver's certificate (it closed the connection "
                f"after the TLS handshake): ${env}/client.pem is not signed by the worker's "
                'ca.pem; give both sides the same `tff-noisy worker certs` set')
  except ssl.SSLCertVerificationError as e:
    return (f"{address}: the worker's certificate does not verify against "
            f'${env}/ca.pem ({e.verify_message}): give both sides the same `tff-noisy worker '
            'certs` set, made with --name for the name or address the driver dials')
  except ssl.SSLError as e:
    if e.reason == 'WRONG_VERSION_NUMBER':
      return (f'{address} speaks no TLS: it is a loopback worker started without --certs; '
              f'unset ${env} to reach it, or start it with --certs')
    return f'{address}: the TLS handshake failed ({e.reason or e})'
  except OSError:
    return None
  return None


LOOPBACK = '127.0.0.1'  # Where a worker listens by default: this machine only.
INSECURE_HELP = (
    'serve with no TLS and no authentication: with a loopback --host, behind the front, so '
    'that every user of this machine can run any program as you through the port; without '
    "--host, as TFF's worker binary does by itself, on every interface, so that anyone who "
    'can reach the port can (only for a machine or network nobody else uses)')


def serve(port: int, max_concurrent_calls: int = -1, host: Optional[str] = None,
          certs: Optional[str] = None, insecure: bool = False) -> None:
  """Runs a TFF worker on ``port`` until SIGINT or SIGTERM.

  The binary runs in a private network namespace behind a front on ``host:port``
  (``tff_noisy.worker_front``, in a process forked for it) that speaks mutual TLS with
  ``certs``. Without ``certs`` only ``insecure`` serves: plain behind the front on a
  loopback ``host`` (every user of the machine reaches it), else the binary alone on every
  interface.

  Args:
    port: TCP port, 1-65535.
    max_concurrent_calls: Most parallel calls of one computation (clients trained at
      once); 0 or less: no limit.
    host: The address to listen on (default ``LOOPBACK``; with ``insecure`` a loopback
      address, or none or one of ``EVERY_INTERFACE`` for the bare binary).
    certs: A directory with ``ca.pem``, ``server.pem`` and ``server.key``
      (``tff_noisy.worker_tls``).
    insecure: Serve without the namespace and without TLS (``INSECURE_HELP``).

  Raises:
    UserError: a bad port, host or certificate directory, a port in use, no private
      network namespace on this system, or the worker exited by itself.
  """
  if not 1 <= port <= 65535:
    raise errors.UserError(f'--port: {port} is not in 1-65535')
  command = [worker_binary(), f'--port={port}',
             f'--max_concurrent_computation_calls={max_concurrent_calls}']
  if insecure and not (host is not None and worker_front.is_loopback(host)):
    _serve_insecure(port, command, host, certs)
    return
  if insecure and certs:
    raise errors.UserError('--insecure: a worker with --certs is not insecure; give one of '
                           '--insecure and --certs')
  host = host or LOOPBACK
  context = worker_tls.worker_context(certs) if certs else None
  if context is None and not worker_front.is_loopback(host):
    raise errors.UserError(
        f'--host: {host} reaches other machines, and a worker serves them only with mutual '
        'TLS: add --certs DIR (`tff-noisy worker certs DIR` writes one), reach a loopback '
        'worker through an SSH tunnel, or accept that anyone who reaches the port runs any '
        'program as this user with --insecure (docs/guide.md: Running on several machines)')
  if context is None and not insecure:
    raise errors.UserError(
        f'worker: without --certs, port {port} of {host} takes connections from every user '
        f'of this machine, and each could run any program as {_user()} through it: add '
        '--certs DIR (`tff-noisy worker certs DIR` writes one; the driver sets '
        f'${worker_tls.CERTS_ENV}=DIR), or accept that with --insecure --host {host}')
  listener = worker_front.listen(host, port)
  warning = None
  if context:
    where = (f'port {port} of {host} with mutual TLS (drivers need a client certificate '
             f'of {os.path.join(certs, "ca.pem")})')
  else:
    where = f'port {port} of {host} (this machine only, every user of it)'
    warning = (f'--insecure: port {port} of {host} takes connections with no TLS and no '
               'authentication: every user of this machine can run any program as '
               f'{_user()} through it')
  _serve_confined(listener, port, command, context, where, warning)


def _serve_insecure(port: int, command: List[str], host: Optional[str],
                    certs: Optional[str]) -> None:
  """The binary by itself on every interface, until SIGINT or SIGTERM."""
  if certs:
    raise errors.UserError('--insecure: the worker binary alone speaks no TLS; give one of '
                           '--insecure and --certs')
  if host is not None and host not in worker_front.EVERY_INTERFACE:
    raise errors.UserError(
        f"--host: {host!r} cannot be honoured with --insecure: TFF's worker_binary takes "
        f"only a port and listens on every interface (--host "
        f"{' | '.join(worker_front.EVERY_INTERFACE)}), or a loopback --host keeps it to "
        'this machine; with --certs a worker listens on the address you give')
  _check_port_free(port)
  process = tff_runtime.WorkerPopen(command)
  stopping = []

  def stop(signum, _):
    stopping.append(signum)
    if process.poll() is None:  # SIGTERM: a shell's background job ignores SIGINT.
      process.send_signal(signal.SIGTERM)

  previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
  try:
    if _wait_listening(process, port):
      errors.warn(f"--insecure: TFF's worker binary serves port {port} on every interface "
                  'with no TLS and no authentication: anyone who can reach it runs any '
                  f'program as {_user()} on this machine')
      print(f'{errors.PROG} worker: TFF worker (pid {process.pid}) listening on port {port} '
            'of every interface; Ctrl-C or SIGTERM stops it', flush=True)
    status = process.wait()
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)
    _stop_binary(process)
  if not stopping:
    raise errors.UserError(f'worker: the TFF worker on port {port} exited with status '
                           f'{status}')
  print(f'{errors.PROG} worker: stopped', flush=True)


def _serve_confined(listener, port: int, command: List[str], context, where: str,
                    warning: Optional[str] = None) -> None:
  """Forks the front (it enters the namespace, so this process keeps its network), then
  waits for it; SIGINT or SIGTERM here stop it. The front's error comes back on a pipe;
  ``warning`` is printed once the worker listens."""
  parent = os.getpid()
  front = []
  stopping = []

  def stop(signum, _):
    stopping.append(signum)  # In the front before its own handlers: polled there.
    if os.getpid() == parent and front:
      os.kill(front[0], signal.SIGTERM)

  previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
  read_end, write_end = os.pipe()
  sys.stdout.flush()
  sys.stderr.flush()
  try:
    pid = os.fork()
    if pid == 0:
      os.close(read_end)
      _front_process(listener, port, command, context, where, parent, stopping, write_end,
                     warning)
    front.append(pid)
    os.close(write_end)
    listener.close()
    if stopping:  # A signal before the fork returned.
      os.kill(pid, signal.SIGTERM)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with os.fdopen(read_end, 'rb') as pipe:
      message = pipe.read().decode()
  finally:
    for sig, handler in previous.items():
      signal.signal(sig, handler)
  if message:
    raise errors.UserError(message)
  if status != 0:
    raise errors.UserError(f'worker: the worker\'s front process ended with status {status}')
  print(f'{errors.PROG} worker: stopped', flush=True)


def _front_process(listener, port, command, context, where, parent, stopping,
                   report_fd, warning=None) -> None:
  """The forked front: private network, the binary in it, forwarding; never returns."""
  status = 2
  message = ''
  try:
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # The parent died before prctl: nothing would stop us.
      os._exit(1)
    try:
      worker_front.enter_private_network()
    except worker_front.NoPrivateNetwork as e:
      message = (f"worker: TFF's worker binary listens on every interface, and it cannot "
                 f'be confined to this machine here: {e}; run it on a Linux machine that '
                 'allows network namespaces, or with --insecure, which exposes it to '
                 'every machine that reaches the port')
      return
    process = tff_runtime.WorkerPopen(command)
    try:
      if _wait_listening(process, port):
        if warning:
          errors.warn(warning)
          sys.stderr.flush()
        print(f'{errors.PROG} worker: TFF worker (pid {process.pid}) listening on {where}; '
              'Ctrl-C or SIGTERM stops it', flush=True)
        worker_front.forward(listener, port, context,
                             lambda: bool(stopping) or process.poll() is not None)
      if process.poll() is not None:
        message = (f'worker: the TFF worker on port {port} exited with status '
                   f'{process.returncode}')
        return
      status = 0
    finally:
      _stop_binary(process)
  except BaseException as e:  # pylint: disable=broad-except
    message = f'worker: {type(e).__name__}: {e}'
  finally:
    os.write(report_fd, message.encode())
    os._exit(status if not message else 2)


def _stop_binary(process, timeout: float = 10.0) -> None:
  """Stops the binary if it still runs (SIGTERM, then SIGKILL after ``timeout``)."""
  if process.poll() is None:
    process.send_signal(signal.SIGTERM)
    try:
      process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()


def _user() -> str:
  try:
    return f'{pwd.getpwuid(os.getuid()).pw_name} (uid {os.getuid()})'
  except KeyError:
    return f'uid {os.getuid()}'


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
