"""What keeps a TFF worker to the connections its user allows (Linux).

TFF's ``worker_binary`` listens on every interface and runs whatever computation it is
sent. ``tff-noisy worker`` therefore creates its listening socket on the address the user
chose (:func:`listen`), then moves into a private network namespace
(:func:`enter_private_network`: only a loopback interface, reachable from no other
process), starts the binary there and forwards each accepted connection to it
(:func:`forward`). With a TLS context the front first completes a mutual TLS handshake
and drops a connection without a client certificate of the worker's authority.

TensorFlow-free; the standard library only.
"""

import asyncio
import ctypes
import errno
import fcntl
import ipaddress
import os
import signal
import socket
import ssl
import struct
import sys
from typing import Callable, Optional

from tff_noisy import errors

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = '16sH14x'  # struct ifreq: the interface's name and its flags.
_CHUNK = 1 << 20  # Bytes forwarded per read (gRPC messages reach 2 GB).
_HANDSHAKE_SECONDS = 20.0
_REFUSALS = {  # OpenSSL's reason for a failed handshake: what it means here.
    'WRONG_VERSION_NUMBER': 'no TLS (a driver without certificates)',
    'HTTP_REQUEST': 'no TLS (a driver without certificates)',
    'PEER_DID_NOT_RETURN_A_CERTIFICATE': 'no client certificate',
    'CERTIFICATE_VERIFY_FAILED': "a client certificate this worker's ca.pem did not sign",
}
# ``--host`` values that mean every interface.
EVERY_INTERFACE = ('0.0.0.0', '::', '*')


class NoPrivateNetwork(Exception):
  """This system gives the process no private network namespace; the message says why."""


def enter_private_network() -> None:
  """Moves this process (which must be single-threaded unless root) into a new network
  namespace with its loopback interface up; as another user than root, inside a new user
  namespace that maps only this user and group.

  Raises:
    NoPrivateNetwork: not Linux, or the kernel refuses the namespaces.
  """
  if not sys.platform.startswith('linux'):
    raise NoPrivateNetwork(f'network namespaces are Linux only, this is {sys.platform}')
  uid, gid = os.getuid(), os.getgid()
  flags = _CLONE_NEWNET if uid == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
  libc = ctypes.CDLL(None, use_errno=True)
  if libc.unshare(flags) != 0:
    code = ctypes.get_errno()
    what = 'a network namespace' if uid == 0 else 'user and network namespaces'
    raise NoPrivateNetwork(f'the kernel refused {what} (unshare: {os.strerror(code)} '
                           f'[{errno.errorcode.get(code, code)}])')
  if flags & _CLONE_NEWUSER:
    for name, text in (('setgroups', 'deny'), ('uid_map', f'{uid} {uid} 1'),
                       ('gid_map', f'{gid} {gid} 1')):
      with open(f'/proc/self/{name}', 'w') as f:
        f.write(text)
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
    flags = struct.unpack(_IFREQ, fcntl.ioctl(probe, _SIOCGIFFLAGS,
                                              struct.pack(_IFREQ, b'lo', 0)))[1]
    fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack(_IFREQ, b'lo', flags | _IFF_UP))


def is_loopback(host: str) -> bool:
  """Whether every address ``host`` resolves to is a loopback address (False if none)."""
  try:
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
  except socket.gaierror:
    return False
  return bool(infos) and all(
      ipaddress.ip_address(info[4][0].split('%')[0]).is_loopback for info in infos)


def listen(host: str, port: int) -> socket.socket:
  """A socket listening on ``host:port`` (``EVERY_INTERFACE``: IPv4 and IPv6 where there is
  IPv6).

  Raises:
    UserError: ``host`` does not resolve or is no address of this machine, or the port is
      in use.
  """
  dual = host in ('::', '*') and socket.has_dualstack_ipv6()
  if host in EVERY_INTERFACE:
    family, address = ((socket.AF_INET6, ('::', port)) if dual
                       else (socket.AF_INET, ('0.0.0.0', port)))
  else:
    try:
      info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
      raise errors.UserError(f'--host: {host!r} does not resolve ({e.strerror})') from None
    family, address = info[0], info[4]
  try:
    return socket.create_server(address, family=family, dualstack_ipv6=dual)
  except OSError as e:
    if e.errno == errno.EADDRINUSE:
      raise errors.UserError(f'worker: port {port} is in use ({e.strerror})') from None
    raise errors.UserError(f'--host: cannot listen on {host!r} port {port} '
                           f'({e.strerror})') from None


def forward(listener: socket.socket, inner_port: int, context: Optional[ssl.SSLContext],
            should_stop: Callable[[], bool]) -> None:
  """Forwards every connection ``listener`` accepts to ``127.0.0.1:inner_port`` until
  SIGINT or SIGTERM, or until ``should_stop()`` (polled) is true; with ``context``, only
  those that complete its TLS handshake (a refused one is a line on stderr)."""
  asyncio.run(_forward(listener, inner_port, context, should_stop))


async def _forward(listener, inner_port, context, should_stop):
  loop = asyncio.get_running_loop()
  stop = asyncio.Event()
  for sig in (signal.SIGINT, signal.SIGTERM):
    loop.add_signal_handler(sig, stop.set)
  connections = set()

  async def connection(reader, writer):
    connections.add(asyncio.current_task())
    try:
      await _connection(reader, writer, inner_port, context)
    finally:
      connections.discard(asyncio.current_task())

  server = await asyncio.start_server(connection, sock=listener)
  while not stop.is_set() and not should_stop():
    try:
      await asyncio.wait_for(stop.wait(), 0.2)
    except asyncio.TimeoutError:
      pass
  server.close()
  for task in list(connections):
    task.cancel()
  await asyncio.gather(*connections, return_exceptions=True)


async def _connection(reader, writer, inner_port, context):
  """One client's connection, forwarded both ways until either side closes."""
  peer = writer.get_extra_info('peername')
  peer = f'{peer[0]}:{peer[1]}' if peer else 'an unknown address'
  inner_writer = None
  try:
    if context is not None:
      try:
        await writer.start_tls(context, ssl_handshake_timeout=_HANDSHAKE_SECONDS)
      except (ssl.SSLError, OSError, asyncio.TimeoutError) as e:
        reason = getattr(e, 'reason', None) or str(e) or type(e).__name__
        what = _REFUSALS.get(reason, 'TLS handshake failed')
        if '_ALERT_' in reason:  # The driver's alert: it rejected this worker.
          what = "the driver refused this worker's certificate"
        print(f'{errors.PROG} worker: refused a connection from {peer}: {what} ({reason})',
              file=sys.stderr, flush=True)
        return
    inner_reader, inner_writer = await asyncio.open_connection('127.0.0.1', inner_port)
    pipes = [asyncio.ensure_future(_pipe(reader, inner_writer)),
             asyncio.ensure_future(_pipe(inner_reader, writer))]
    try:
      await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
    finally:
      for pipe in pipes:
        pipe.cancel()
  except OSError:  # The worker binary is gone, or the client reset the connection.
    pass
  finally:
    for w in (writer, inner_writer):
      if w is not None:
        w.close()


async def _pipe(reader, writer):
  try:
    while True:
      data = await reader.read(_CHUNK)
      if not data:
        return
      writer.write(data)
      await writer.drain()
  except OSError:
    return
