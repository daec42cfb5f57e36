"""Mutual TLS between a driver and its workers: the certificates and both sides' contexts.

``tff-noisy worker certs DIR`` (:func:`create`) writes a fresh certificate authority and
two certificates it signs: the workers' (``server.pem``/``server.key``, valid for the
names the driver dials) and the driver's (``client.pem``/``client.key``). A worker started
with ``--certs DIR`` (``ca.pem``, ``server.pem``, ``server.key``) accepts only
connections that present a client certificate of that authority; a driver with
``$TFF_NOISY_WORKER_CERTS`` set to a directory with ``ca.pem``, ``client.pem`` and
``client.key`` dials its workers over gRPC secure channels and checks the worker's
certificate in turn. The authority's private key is not kept: nothing else can be signed
by it, and a new ``certs`` directory replaces the whole set.

TensorFlow-free (the ``cryptography`` package is imported only to create certificates).
"""

import datetime
import ipaddress
import os
import re
import ssl
from typing import Dict, List, Sequence

from tff_noisy import errors

CERTS_ENV = 'TFF_NOISY_WORKER_CERTS'  # The driver's directory: ca.pem, client.pem, client.key.
WORKER_FILES = ('ca.pem', 'server.pem', 'server.key')
DRIVER_FILES = ('ca.pem', 'client.pem', 'client.key')
# Names every worker certificate holds: a driver on the worker's machine, or at the near
# end of an SSH tunnel.
LOOPBACK_NAMES = ('localhost', '127.0.0.1', '::1')
VALID_DAYS = 365
_DNS_NAME = re.compile(r'^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$')


class CertificateError(errors.UserError):
  """A certificate directory is missing a file, or a file is not what it should be."""


def check_names(names: Sequence[str]) -> List[str]:
  """The host names and IP addresses of ``--name``, loopback ones added, without repeats.

  Raises:
    CertificateError: a name is neither an IP address nor a DNS name.
  """
  for name in names:
    try:
      ipaddress.ip_address(name)
    except ValueError:
      if not _DNS_NAME.match(name) or len(name) > 253:
        raise CertificateError(f'--name: {name!r} is neither an IP address nor a host name '
                               '(letters, digits, hyphens and dots)') from None
  return list(dict.fromkeys([*names, *LOOPBACK_NAMES]))


def create(directory: str, names: Sequence[str]) -> Dict[str, str]:
  """Writes a new authority's ``ca.pem`` and the worker and driver certificates it signs
  into ``directory`` (created; the keys readable by this user only).

  Args:
    directory: Where to write; must not hold any of the files yet.
    names: Host names and IP addresses the driver dials the workers by (loopback always).

  Returns:
    ``{file name: path}`` of the files written.

  Raises:
    CertificateError: a bad name, or ``directory`` already holds one of the files.
  """
  names = check_names(names)
  files = sorted(set(WORKER_FILES + DRIVER_FILES))
  existing = [f for f in files if os.path.lexists(os.path.join(directory, f))]
  if existing:
    raise CertificateError(f"worker certs: {directory} already holds {', '.join(existing)}; "
                           'give an empty or new directory (a new set replaces the old '
                           'one on every machine)')
  # pylint: disable=g-import-not-at-top
  from cryptography import x509
  from cryptography.hazmat.primitives import hashes
  from cryptography.hazmat.primitives import serialization
  from cryptography.hazmat.primitives.asymmetric import ec
  from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
  # pylint: enable=g-import-not-at-top
  now = datetime.datetime.now(datetime.timezone.utc)

  def certificate(common_name, key, issuer_name, issuer_key, extensions):
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
               .issuer_name(issuer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))
    for extension, critical in extensions:
      builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())

  ca_key = ec.generate_private_key(ec.SECP256R1())
  ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'tff-noisy worker CA')])
  ca = certificate('tff-noisy worker CA', ca_key, ca_name, ca_key, [
      (x509.BasicConstraints(ca=True, path_length=0), True),
      (x509.KeyUsage(digital_signature=False, content_commitment=False,
                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                     key_cert_sign=True, crl_sign=True, encipher_only=False,
                     decipher_only=False), True)])

  def leaf(common_name, usage, alt_names):
    key = ec.generate_private_key(ec.SECP256R1())
    extensions = [(x509.BasicConstraints(ca=False, path_length=None), True),
                  (x509.ExtendedKeyUsage([usage]), False)]
    if alt_names:
      extensions.append((x509.SubjectAlternativeName(alt_names), False))
    return certificate(common_name, key, ca_name, ca_key, extensions), key

  alt_names = []
  for name in names:
    try:
      alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
    except ValueError:
      alt_names.append(x509.DNSName(name))
  server, server_key = leaf('tff-noisy worker', ExtendedKeyUsageOID.SERVER_AUTH, alt_names)
  client, client_key = leaf('tff-noisy driver', ExtendedKeyUsageOID.CLIENT_AUTH, [])
  pem = serialization.Encoding.PEM

  def key_bytes(key):
    return key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())

  contents = {'ca.pem': ca.public_bytes(pem), 'server.pem': server.public_bytes(pem),
              'server.key': key_bytes(server_key), 'client.pem': client.public_bytes(pem),
              'client.key': key_bytes(client_key)}
  os.makedirs(directory, exist_ok=True)
  written = {}
  for name, data in contents.items():
    path = os.path.join(directory, name)
    mode = 0o600 if name.endswith('.key') else 0o644
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), 'wb') as f:
      f.write(data)
    written[name] = path
  return written


def _paths(directory: str, names: Sequence[str], what: str) -> Dict[str, str]:
  """``{name: path}`` of ``names`` in ``directory``; CertificateError naming a missing one."""
  paths = {name: os.path.join(directory, name) for name in names}
  missing = [name for name, path in paths.items() if not os.path.isfile(path)]
  if missing:
    raise CertificateError(f"{what}: {directory} has no {', '.join(missing)} (`tff-noisy "
                           'worker certs DIR` writes a set)')
  return paths


def worker_context(directory: str) -> ssl.SSLContext:
  """The worker's TLS server context: its certificate, and client certificates required
  and checked against ``directory/ca.pem``; HTTP/2 (gRPC) negotiated.

  Raises:
    CertificateError: a file is missing or is not a matching PEM certificate or key.
  """
  paths = _paths(directory, WORKER_FILES, '--certs')
  context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
  context.minimum_version = ssl.TLSVersion.TLSv1_2
  context.verify_mode = ssl.CERT_REQUIRED
  try:
    context.load_cert_chain(paths['server.pem'], paths['server.key'])
    context.load_verify_locations(paths['ca.pem'])
  except ssl.SSLError as e:
    raise CertificateError(f'--certs: {directory}: server.pem, server.key and ca.pem are '
                           f'not a certificate, its key and an authority ({e.reason})') from None
  context.set_alpn_protocols(['h2'])
  return context


def driver_files() -> Dict[str, bytes]:
  """``{'root_certificates', 'private_key', 'certificate_chain'}`` for gRPC's
  ``ssl_channel_credentials`` from ``$TFF_NOISY_WORKER_CERTS``; ``{}`` when it is unset.

  Raises:
    CertificateError: a file is missing, or the certificate and key do not match.
  """
  directory = os.environ.get(CERTS_ENV)
  if not directory:
    return {}
  paths = _paths(directory, DRIVER_FILES, f'${CERTS_ENV}')
  probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # Checks the PEM files as gRPC would.
  try:
    probe.load_cert_chain(paths['client.pem'], paths['client.key'])
    probe.load_verify_locations(paths['ca.pem'])
  except ssl.SSLError as e:
    raise CertificateError(f'${CERTS_ENV}: {directory}: client.pem, client.key and ca.pem '
                           f'are not a certificate, its key and an authority ({e.reason})'
                           ) from None
  contents = {}
  for name, path in paths.items():
    with open(path, 'rb') as f:
      contents[name] = f.read()
  return {'root_certificates': contents['ca.pem'], 'private_key': contents['client.key'],
          'certificate_chain': contents['client.pem']}


def driver_context() -> ssl.SSLContext:
  """The driver's TLS client context from ``$TFF_NOISY_WORKER_CERTS`` (which must be set):
  what its gRPC channels do, for diagnosing a worker that does not answer them."""
  directory = os.environ[CERTS_ENV]
  context = ssl.create_default_context(cafile=os.path.join(directory, 'ca.pem'))
  context.load_cert_chain(os.path.join(directory, 'client.pem'),
                          os.path.join(directory, 'client.key'))
  context.set_alpn_protocols(['h2'])
  return context
