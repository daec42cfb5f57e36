"""Remote execution on loopback TFF workers: `tff-noisy worker` (its private network
namespace, mutual TLS, `worker certs`), `--workers`, the split context, a worker lost
mid-run and resume.

Every worker a test starts is stopped by the test (`_workers` fixture, `_stop`,
`_WorkerCommand`). The fast tier splits a small federated computation across two
workers, and across a TLS worker; the slow tier trains through the driver (FedAvg,
MaskedOptim's per-client label logits, FedAvg over TLS) and compares with the local run
of the same seed.
"""
from concurrent import futures
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import portpicker
import pytest

from experiments import run as cli
from tff_noisy import config as config_lib
from tff_noisy import remote
from tff_noisy import tff_runtime
from tff_noisy import worker_front
from tff_noisy import worker_tls
from tff_noisy import workers
from tff_noisy.simulation import checkpoint
from tff_noisy.simulation import driver
from tff_noisy.simulation import results as results_lib

tff = tff_runtime.import_tff()
_ROOT = os.path.join(os.path.dirname(__file__), '..')
_DEMO = os.path.join(_ROOT, 'experiments', 'configs', 'demo.yaml')


# A loopback worker without certificates: served only when asked for with --insecure.
_PLAIN = ('--host', '127.0.0.1', '--insecure')


def _stop(process) -> None:
  if process.poll() is None:
    process.kill()
    process.wait()


class _WorkerCommand:
  """``tff-noisy worker --port P ARGS`` (default ``_PLAIN``) in a process of its own,
  listening: the binary in a private network namespace, as a user runs it."""

  def __init__(self, *args: str, port=None, env=None):
    args = args or _PLAIN
    self.port = port or portpicker.pick_unused_port()
    self.command = tff_runtime.WorkerPopen(  # Killed with this process.
        [sys.executable, '-m', 'experiments.run', 'worker', '--port', str(self.port), *args],
        cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})})
    self.out = self.err = None
    self.line = self.command.stdout.readline()
    if f'listening on port {self.port}' not in self.line:
      self.stop()
      raise RuntimeError(f'the worker did not start: {self.line}{self.err}')
    self.binary_pid = int(self.line.split('(pid ')[1].split(')')[0])
    self.address = f'127.0.0.1:{self.port}'

  def stop(self, sig=signal.SIGTERM) -> str:
    """Stops the command with ``sig`` (once); its stdout, and its stderr in ``err``."""
    if self.err is None:
      if self.command.poll() is None:
        self.command.send_signal(sig)
      try:
        self.out, self.err = self.command.communicate(timeout=30)
      finally:
        _stop(self.command)
    return self.out

  def binary_gone(self) -> bool:
    return not os.path.exists(f'/proc/{self.binary_pid}')


class _Workers:
  """Loopback workers started by one test (``tff-noisy worker``); ``kill(i)`` kills one's
  binary, ``restart(i)`` starts a fresh one on the port."""

  def __init__(self, count: int):
    self.ports = [portpicker.pick_unused_port() for _ in range(count)]
    self.workers = []
    for port in self.ports:
      self.workers.append(_WorkerCommand(port=port))

  @property
  def addresses(self):
    return [f'127.0.0.1:{port}' for port in self.ports]

  def kill(self, i: int) -> None:
    os.kill(self.workers[i].binary_pid, signal.SIGKILL)

  def restart(self, i: int) -> None:
    self.workers[i].stop()  # The command ends once its binary is gone.
    self.workers[i] = _WorkerCommand(port=self.ports[i])

  def stop_all(self) -> None:
    for worker in self.workers:
      worker.stop()


@pytest.fixture
def two_workers():
  started = _Workers(2)
  try:
    yield started
  finally:
    started.stop_all()


@pytest.fixture
def worker_command():
  """Starts ``_WorkerCommand``s; stops each at the end, killing a binary left behind."""
  started = []

  def start(*args, **kwargs):
    started.append(_WorkerCommand(*args, **kwargs))
    return started[-1]

  yield start
  for worker in started:
    worker.stop()
    if not worker.binary_gone():
      os.kill(worker.binary_pid, signal.SIGKILL)
      raise AssertionError(f'worker_binary {worker.binary_pid} outlived its command')


@pytest.fixture(scope='module')
def certs(tmp_path_factory):
  """A ``tff-noisy worker certs`` set: the worker's and the driver's files."""
  directory = str(tmp_path_factory.mktemp('certs') / 'set')
  worker_tls.create(directory, [])
  return directory


# --- --workers and `tff-noisy worker` ------------------------------------------------------

@pytest.mark.parametrize('text, message', [
    ('localhost', "--workers: 'localhost' is not host:port"),
    ('10.0.0.2:7000,', "--workers: '' is not host:port"),
    (':7000', "--workers: ':7000' is not host:port"),
    ('host:http', "--workers: 'host:http' is not host:port"),
    ('host:0', "--workers: 'host:0': port 0 is not in 1-65535"),
    ('host:70000', "--workers: 'host:70000': port 70000 is not in 1-65535"),
    ('a:1, a:1', "--workers: 'a:1' is named twice"),
])
def test_bad_workers_are_one_error_line_naming_the_entry(capsys, tmp_path, text, message):
  assert workers.parse_workers(' 10.0.0.2:7000 ,[::1]:7001') == ['10.0.0.2:7000',
                                                                 '[::1]:7001']
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', _DEMO, '--out', str(tmp_path / 'run'), '--workers', text])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith(f'tff-noisy: error: {message}') and err.count('\n') == 1, err
  assert not (tmp_path / 'run').exists()


def test_clients_in_the_tflite_interpreter_cannot_use_workers(tmp_path):
  config = config_lib.load(_DEMO, ['fl.client_runtime=tflite'])
  with pytest.raises(config_lib.ConfigError, match="--workers: with fl.client_runtime: "
                     "tflite the clients train in this machine's TFLite interpreter"):
    driver.run_experiment(config, str(tmp_path / 'run'), workers=['127.0.0.1:7000'])
  assert not (tmp_path / 'run').exists()


def test_an_unreachable_worker_is_named_within_seconds(tmp_path, tmp_cache, two_workers):
  silent = f'127.0.0.1:{portpicker.pick_unused_port()}'
  config = config_lib.load(_DEMO, ['fl.rounds=1'])
  began = time.monotonic()
  with pytest.raises(workers.WorkersError,
                     match=f'--workers: no TFF worker answers at {silent} '
                           r'\(waited 5 s\); start one'):
    driver.run_experiment(config, str(tmp_path / 'run'),
                          workers=[two_workers.addresses[0], silent])
  assert time.monotonic() - began < 10
  assert not os.path.exists(tmp_path / 'run' / 'checkpoints')
  assert not tmp_cache.exists()  # Before the data was built.


def test_a_grpc_server_that_is_no_tff_worker_is_refused_before_any_work(tmp_path, tmp_cache):
  import grpc  # pylint: disable=g-import-not-at-top
  server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
  port = server.add_insecure_port('127.0.0.1:0')
  server.start()
  try:
    began = time.monotonic()
    with pytest.raises(workers.WorkersError, match=(
        f'--workers: a gRPC server answers but it is not a TFF worker: 127.0.0.1:{port} '
        r'\(UNIMPLEMENTED: Method not found!\); start')):
      driver.run_experiment(config_lib.load(_DEMO, ['fl.rounds=1']), str(tmp_path / 'run'),
                            workers=[f'127.0.0.1:{port}'])
    assert time.monotonic() - began < 10
  finally:
    server.stop(0)
  assert not tmp_cache.exists()  # Before the data was built.


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
def test_worker_command_serves_until_a_signal(sig, worker_command):
  worker = worker_command()
  assert 'of 127.0.0.1 (this machine only, every user of it)' in worker.line, worker.line
  assert workers.unanswered([worker.address]) == []
  front = [int(pid) for pid in open(f'/proc/{worker.command.pid}/task/'
                                    f'{worker.command.pid}/children').read().split()]
  assert 'stopped' in worker.stop(sig)
  assert worker.command.returncode == 0, worker.err
  assert worker.err.startswith(
      f'tff-noisy: warning: --insecure: port {worker.port} of 127.0.0.1 takes connections '
      'with no TLS and no authentication: every user of this machine can run any program '
      'as '), worker.err
  assert worker.binary_gone()  # Reaped: gone, not a zombie.
  assert front and not any(os.path.exists(f'/proc/{pid}') for pid in front)


def test_worker_command_killed_takes_its_binary_down(worker_command):
  worker = worker_command(*_PLAIN)
  front = int(open(f'/proc/{worker.command.pid}/task/{worker.command.pid}/children').read())
  worker.command.kill()  # SIGKILL: no handler runs in the command.
  worker.command.wait()
  deadline = time.monotonic() + 15
  while os.path.exists(f'/proc/{front}') and time.monotonic() < deadline:
    time.sleep(0.1)
  assert not os.path.exists(f'/proc/{front}') and worker.binary_gone()


def test_the_worker_binary_has_only_a_private_loopback(worker_command):
  """The binary listens on every interface of a network namespace of its own, which has
  only a loopback interface; the front listens on 127.0.0.1 alone."""
  worker = worker_command()
  binary_net = os.readlink(f'/proc/{worker.binary_pid}/ns/net')
  assert binary_net != os.readlink('/proc/self/ns/net')
  with open(f'/proc/{worker.binary_pid}/net/dev') as f:
    interfaces = [line.split(':')[0].strip() for line in f.readlines()[2:]]
  assert interfaces == ['lo']
  listening = []  # (local address, port) of this namespace's listening TCP sockets.
  for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    with open(table) as f:
      for line in f.readlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port = local.split(':')
        if state == '0A' and int(port, 16) == worker.port:
          listening.append(address)
  assert listening == ['0100007F']  # 127.0.0.1, and nothing else on the port.


def test_another_address_needs_certificates_or_insecure(capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['worker', '--port', '7000', '--host', '0.0.0.0'])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith('tff-noisy: error: --host: 0.0.0.0 reaches other machines, and a '
                        'worker serves them only with mutual TLS: add --certs DIR') and (
      'SSH tunnel' in err and '--insecure' in err and err.count('\n') == 1), err


@pytest.mark.parametrize('host', [None, '127.0.0.1', 'localhost', '::1'])
def test_a_loopback_worker_needs_certificates_or_insecure(host):
  """Any user of the machine can reach a loopback port: without --certs, a worker there
  serves only when --insecure says that this is meant. (A subprocess: before, it served
  until the timeout.)"""
  port = portpicker.pick_unused_port()
  done = subprocess.run([sys.executable, '-m', 'experiments.run', 'worker', '--port',
                         str(port), *(['--host', host] if host else [])], cwd=_ROOT,
                        capture_output=True, text=True, timeout=60)
  assert done.returncode == 2 and done.stdout == '', (done.stdout, done.stderr)
  err = done.stderr
  host = host or '127.0.0.1'
  assert err.startswith(f'tff-noisy: error: worker: without --certs, port {port} of {host} '
                        'takes connections from every user of this machine, and each could '
                        'run any program as ') and err.endswith(
      f'or accept that with --insecure --host {host}\n') and err.count('\n') == 1, err


@pytest.mark.parametrize('args, message', [
    (['--insecure', '--certs', 'd'], '--insecure: the worker binary alone speaks no TLS'),
    (['--insecure', '--host', '127.0.0.1', '--certs', 'd'],
     '--insecure: a worker with --certs is not insecure'),
    (['--insecure', '--host', '10.0.0.2'],
     "--host: '10.0.0.2' cannot be honoured with --insecure"),
    (['--certs', 'nowhere'], '--certs: nowhere has no ca.pem, server.pem, server.key'),
])
def test_bad_worker_options_are_one_line(capsys, args, message):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['worker', '--port', '7000', *args])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith(f'tff-noisy: error: {message}') and err.count('\n') == 1, err


def test_without_a_private_network_the_worker_refuses_to_start(certs):
  """Where the kernel gives no network namespace, only --insecure serves (it says what it
  exposes); nothing is left running."""
  port = portpicker.pick_unused_port()
  script = ('from tff_noisy import worker_front\n'
            'def refuse():\n'
            '  raise worker_front.NoPrivateNetwork("the kernel refused (test)")\n'
            'worker_front.enter_private_network = refuse\n'
            'from experiments import run\n'
            f'run.main(["worker", "--port", "{port}", "--certs", "{certs}"])\n')
  done = subprocess.run([sys.executable, '-c', script], cwd=_ROOT, capture_output=True,
                        text=True, timeout=60)
  assert done.returncode == 2
  assert done.stderr.startswith(
      "tff-noisy: error: worker: TFF's worker binary listens on every interface, and it "
      'cannot be confined to this machine here: the kernel refused (test); run it on a '
      'Linux machine that allows network namespaces, or with --insecure, which exposes it'
  ) and done.stderr.count('\n') == 1, done.stderr
  assert f'--port={port}' not in subprocess.run(['ps', '-eo', 'args'], capture_output=True,
                                                text=True).stdout


def test_insecure_serves_the_bare_binary_and_says_what_it_exposes():
  """Run in a network namespace of its own (the test's), so it exposes nothing here."""
  port = portpicker.pick_unused_port()
  command = subprocess.Popen(
      [sys.executable, '-m', 'experiments.run', 'worker', '--port', str(port), '--insecure'],
      cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      preexec_fn=worker_front.enter_private_network)
  try:
    line = command.stdout.readline()
    assert f'listening on port {port} of every interface' in line, line
    binary_pid = int(line.split('(pid ')[1].split(')')[0])
    command.send_signal(signal.SIGTERM)
    out, err = command.communicate(timeout=30)
  finally:
    _stop(command)
  assert command.returncode == 0 and 'stopped' in out
  assert err.startswith(f"tff-noisy: warning: --insecure: TFF's worker binary serves port "
                        f'{port} on every interface with no TLS and no authentication: '
                        'anyone who can reach it runs any program as '), err
  assert not os.path.exists(f'/proc/{binary_pid}')


def test_worker_command_refuses_a_port_in_use(capsys, two_workers):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['worker', '--port', str(two_workers.ports[0]), *_PLAIN])
  assert exit_info.value.code == 2
  assert f'worker: port {two_workers.ports[0]} is in use' in capsys.readouterr().err


# --- mutual TLS ----------------------------------------------------------------------------

def test_worker_certs_writes_a_set_once(capsys, tmp_path):
  from cryptography import x509  # pylint: disable=g-import-not-at-top
  directory = str(tmp_path / 'set')
  cli.main(['worker', 'certs', directory, '--name', '10.0.0.2', '--name', 'worker1.lan'])
  assert 'the authority\'s key is not kept' in capsys.readouterr().out
  assert sorted(os.listdir(directory)) == ['ca.pem', 'client.key', 'client.pem',
                                           'server.key', 'server.pem']
  for key in ('client.key', 'server.key'):
    assert os.stat(os.path.join(directory, key)).st_mode & 0o077 == 0
  with open(os.path.join(directory, 'server.pem'), 'rb') as f:
    names = x509.load_pem_x509_certificate(f.read()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
  assert [str(n) for n in names.get_values_for_type(x509.IPAddress)] == [
      '10.0.0.2', '127.0.0.1', '::1']
  assert names.get_values_for_type(x509.DNSName) == ['worker1.lan', 'localhost']
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['worker', 'certs', directory])
  err = capsys.readouterr().err
  assert exit_info.value.code == 2 and err.count('\n') == 1
  assert f'worker certs: {directory} already holds ca.pem, client.key' in err


def test_a_driver_without_the_certificate_is_refused(capsys, tmp_path, tmp_cache, certs,
                                                     worker_command, monkeypatch):
  monkeypatch.delenv(worker_tls.CERTS_ENV, raising=False)
  worker = worker_command('--host', '127.0.0.1', '--certs', certs)
  assert 'with mutual TLS' in worker.line
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', _DEMO, '--out', str(tmp_path / 'run'), '--workers', worker.address])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err == (f'tff-noisy: error: --workers: {worker.address} is a TLS worker that takes '
                 'only drivers with a client certificate of its authority: set '
                 f'${worker_tls.CERTS_ENV} to a directory with its ca.pem, client.pem and '
                 'client.key (`tff-noisy worker certs DIR` wrote them)\n')
  assert not tmp_cache.exists()  # Before the data was built.
  worker.stop()
  assert 'refused a connection from 127.0.0.1:' in worker.err


def test_a_driver_with_another_sets_certificate_is_refused(tmp_path, certs, worker_command,
                                                           monkeypatch):
  other = str(tmp_path / 'other')
  worker_tls.create(other, [])
  mixed = tmp_path / 'mixed'  # The worker's authority, another set's client certificate.
  mixed.mkdir()
  for name, source in (('ca.pem', certs), ('client.pem', other), ('client.key', other)):
    with open(os.path.join(source, name), 'rb') as f:
      (mixed / name).write_bytes(f.read())
  worker = worker_command('--host', '127.0.0.1', '--certs', certs)
  monkeypatch.setenv(worker_tls.CERTS_ENV, str(mixed))
  with pytest.raises(workers.WorkersError, match=f'--workers: {worker.address} refused this '
                     "driver's certificate"):
    workers.check_workers([worker.address])
  # The command line: one line, no gRPC log of the failed handshakes.
  done = subprocess.run([sys.executable, '-m', 'experiments.run', 'run', _DEMO, '--out',
                         str(tmp_path / 'run'), '--workers', worker.address], cwd=_ROOT,
                        capture_output=True, text=True, timeout=120,
                        env={**{k: v for k, v in os.environ.items()
                                if k != 'TF_CPP_MIN_LOG_LEVEL'},  # The conftest sets one.
                             worker_tls.CERTS_ENV: other})
  assert done.returncode == 2
  assert done.stderr.startswith(f"tff-noisy: error: --workers: {worker.address}: the "
                                "worker's certificate does not verify against") and (
      done.stderr.count('\n') == 1), done.stderr
  worker.stop()
  assert "a client certificate this worker's ca.pem did not sign" in worker.err
  assert "the driver refused this worker's certificate" in worker.err


def test_a_driver_with_certificates_is_told_a_loopback_worker_has_no_tls(
    certs, worker_command, monkeypatch):
  worker = worker_command()
  monkeypatch.setenv(worker_tls.CERTS_ENV, certs)
  with pytest.raises(workers.WorkersError, match=f'--workers: {worker.address} speaks no TLS: '
                     'it is a loopback worker started without --certs'):
    workers.check_workers([worker.address])


def test_a_bad_certificate_directory_is_one_line_before_any_connection(tmp_path, monkeypatch):
  monkeypatch.setenv(worker_tls.CERTS_ENV, str(tmp_path))
  with pytest.raises(worker_tls.CertificateError, match=(
      f'^\\${worker_tls.CERTS_ENV}: {tmp_path} has no ca.pem, client.pem, client.key ')):
    workers.check_workers(['127.0.0.1:1'])


# --- the split context -------------------------------------------------------------------

@tff.tensorflow.computation(np.float32, np.float32)
def _scaled(value, scale):
  return value * scale


@tff.federated_computation(tff.FederatedType(np.float32, tff.SERVER),
                           tff.FederatedType(np.float32, tff.CLIENTS))
def _scale_and_sum(scale, values):
  """A round in miniature: broadcast, client work, one aggregation, clients' results."""
  scaled = tff.federated_map(_scaled, (values, tff.federated_broadcast(scale)))
  return tff.federated_sum(scaled), scaled


@tff.tensorflow.computation(np.float32, np.float32)
def _minus(value, mean):
  return value - mean


@tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
def _centred_sum(values):
  """Two dependent aggregations: not in TFF's mergeable form."""
  mean = tff.federated_mean(values)
  return tff.federated_sum(tff.federated_map(_minus, (values, tff.federated_broadcast(mean))))


def test_clients_are_split_across_workers_with_the_local_result(two_workers, monkeypatch):
  local = _scale_and_sum(2.0, [1.0, 2.0, 3.0, 4.0, 5.0])
  called = []
  real_invoke = remote._invoke_once

  async def recording_invoke(context, comp, arg):
    called.append(context.address)
    return await real_invoke(context, comp, arg)

  monkeypatch.setattr(remote, '_invoke_once', recording_invoke)
  with remote.on_workers(two_workers.addresses, 'the test') as runtime:
    split = _scale_and_sum(2.0, [1.0, 2.0, 3.0, 4.0, 5.0])
  assert runtime == {'workers': two_workers.addresses}
  assert split[0] == local[0] == 30.0 and list(split[1]) == list(local[1])
  assert set(called) == set(two_workers.addresses)
  assert _scale_and_sum(1.0, [1.0]) == (1.0, [1.0])  # The local context is back.


def test_a_lost_worker_is_named_not_waited_for(two_workers):
  with remote.on_workers(two_workers.addresses, 'the test'):
    _scale_and_sum(1.0, [1.0, 2.0])
    two_workers.kill(1)
    began = time.monotonic()
    with pytest.raises(workers.WorkerLost) as lost:
      _scale_and_sum(1.0, [1.0, 2.0])
  assert time.monotonic() - began < 15
  assert lost.value.workers == [two_workers.addresses[1]]
  assert f'TFF worker {two_workers.addresses[1]} stopped answering (' in str(lost.value)
  assert 'continue with --resume' in str(lost.value)


def test_a_tls_worker_computes_what_the_local_context_does(certs, worker_command,
                                                          monkeypatch):
  local = _scale_and_sum(3.0, [1.0, 2.0, 4.0])
  worker = worker_command('--host', '127.0.0.1', '--certs', certs)
  monkeypatch.setenv(worker_tls.CERTS_ENV, certs)
  with remote.on_workers([worker.address], 'the test'):
    split = _scale_and_sum(3.0, [1.0, 2.0, 4.0])
  assert split[0] == local[0] == 21.0 and list(split[1]) == list(local[1])


def test_a_computation_not_in_mergeable_form_is_a_clear_error(two_workers):
  with remote.on_workers(two_workers.addresses, 'method.name x with fl.aggregator y'):
    with pytest.raises(remote.NotMergeable,
                       match=r'--workers: method.name x with fl.aggregator y cannot run on '
                             r'remote workers: .* \(\w+Error: .+\); run it without --workers'):
      _centred_sum([1.0, 2.0, 3.0])


# --- training through the driver (slow) ----------------------------------------------------

def _config(method='fedavg', rounds=3, *extra):
  """The demo config, small: 6 clients, 3 a round (split 2 + 1 over two workers), on
  ``tff`` (``auto`` is ``tff`` with workers; the local runs they must equal pin it too)."""
  return config_lib.load(_DEMO, [f'fl.rounds={rounds}', 'partition.num_clients=6',
                                 f'method.name={method}', 'method.params={}',
                                 'fl.client_runtime=tff', *extra])


def _assert_same_run(run_dir, reference_dir, atol=1e-5):
  ours, reference = results_lib.load(run_dir), results_lib.load(reference_dir)
  assert [r['clients'] for r in ours['rounds']] == [r['clients'] for r in reference['rounds']]
  for key in ('train_loss', 'test_accuracy'):
    np.testing.assert_allclose([r[key] for r in ours['rounds']],
                               [r[key] for r in reference['rounds']], atol=atol)
  for mine, theirs in zip(results_lib.load_final_weights(run_dir),
                          results_lib.load_final_weights(reference_dir)):
    np.testing.assert_allclose(mine, theirs, atol=atol)


@pytest.fixture(scope='module')
def fedavg_reference(tmp_path_factory):
  """A local FedAvg run of ``_config()``: what every remote run must reproduce."""
  out = str(tmp_path_factory.mktemp('local') / 'fedavg')
  cache = str(tmp_path_factory.mktemp('cache'))
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv('TFF_NOISY_CACHE', cache)
    driver.run_experiment(_config(), out, progress=False)
  return out, cache


@pytest.fixture
def reference_cache(fedavg_reference, monkeypatch):
  monkeypatch.setenv('TFF_NOISY_CACHE', fedavg_reference[1])
  return fedavg_reference[0]


@pytest.mark.slow
def test_fedavg_on_two_workers_equals_the_local_run(tmp_path, reference_cache, two_workers):
  out = str(tmp_path / 'remote')
  driver.run_experiment(_config(), out, progress=False, workers=two_workers.addresses)
  _assert_same_run(out, reference_cache)
  results = results_lib.load(out)
  assert results['runtime'] == {
      'workers': two_workers.addresses, 'client_runtime': 'tff',
      'clients_trained_on': 'TFF remote workers (CPU)',
      'aggregated_in': 'TFF remote workers, groups merged in this process'}
  assert results_lib.load(reference_cache)['runtime'] == {
      'client_runtime': 'tff', 'clients_trained_on': 'TFF worker_binary (CPU)',
      'aggregated_in': 'TFF worker_binary (CPU)'}


@pytest.mark.slow
def test_fedavg_on_two_tls_workers_equals_the_local_run(tmp_path, reference_cache, certs,
                                                        worker_command, monkeypatch):
  started = [worker_command('--host', '127.0.0.1', '--certs', certs) for _ in range(2)]
  monkeypatch.setenv(worker_tls.CERTS_ENV, certs)
  out = str(tmp_path / 'remote')
  driver.run_experiment(_config(), out, progress=False,
                        workers=[worker.address for worker in started])
  _assert_same_run(out, reference_cache)


@pytest.mark.slow
def test_client_state_on_two_workers_equals_the_local_run(tmp_path, tmp_cache, two_workers):
  """MaskedOptim: per-client label logits come back from the workers each round."""
  config = _config('maskedoptim', 3, 'method.params={warmup_rounds: 1}')
  driver.run_experiment(config, str(tmp_path / 'local'), progress=False)
  driver.run_experiment(config, str(tmp_path / 'remote'), progress=False,
                        workers=two_workers.addresses)
  _assert_same_run(str(tmp_path / 'remote'), str(tmp_path / 'local'))
  ours, reference = (np.load(tmp_path / name / 'checkpoints' / 'round_00003' /
                             'client_state.npz') for name in ('remote', 'local'))
  assert any(key.endswith('/objective.label_logits') for key in reference.files)
  assert sorted(ours.files) == sorted(reference.files)
  for key in reference.files:
    np.testing.assert_allclose(ours[key], reference[key], atol=1e-5, err_msg=key)


@pytest.mark.slow
def test_a_worker_dying_mid_run_stops_resumably(tmp_path, reference_cache, two_workers,
                                                monkeypatch):
  out = str(tmp_path / 'remote')
  real_save = checkpoint.save

  def kill_after_round_1(directory, round_num, *args, **kwargs):
    real_save(directory, round_num, *args, **kwargs)
    if round_num == 1:
      two_workers.kill(0)

  monkeypatch.setattr(checkpoint, 'save', kill_after_round_1)
  with pytest.raises(workers.WorkerLost) as lost:
    driver.run_experiment(_config(), out, progress=False, workers=two_workers.addresses)
  assert lost.value.workers == [two_workers.addresses[0]]
  monkeypatch.setattr(checkpoint, 'save', real_save)
  saved = sorted(os.listdir(os.path.join(out, 'checkpoints')))
  assert saved == ['round_00001']  # Every completed round, though checkpoint_every is 10.
  two_workers.restart(0)
  driver.run_experiment(_config(), out, resume=True, progress=False,
                        workers=two_workers.addresses[1:])
  _assert_same_run(out, reference_cache)
  parts = results_lib.load(out)['runtime_parts']  # Each part's own workers.
  assert [(p['rounds'], p['workers']) for p in parts] == [
      ([1, 1], two_workers.addresses), ([2, _config().fl.rounds], two_workers.addresses[1:])]


@pytest.mark.slow
def test_a_remote_run_killed_and_resumed_gives_the_uninterrupted_result(
    tmp_path, reference_cache, two_workers):
  out = str(tmp_path / 'remote')
  command = [sys.executable, '-m', 'experiments.run', 'run', _DEMO, '--out', out,
             '--workers', ','.join(two_workers.addresses)]
  for setting in ('fl.rounds=3', 'partition.num_clients=6', 'method.name=fedavg',
                  'method.params={}'):
    command += ['--set', setting]
  run = subprocess.Popen(command, cwd=_ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
  first = os.path.join(out, 'checkpoints', 'round_00001')
  try:
    deadline = time.monotonic() + 900
    while not os.path.exists(first) and run.poll() is None and time.monotonic() < deadline:
      time.sleep(0.2)
    assert os.path.exists(first), 'the run wrote no checkpoint'
    run.send_signal(signal.SIGKILL)
    run.wait()
  finally:
    _stop(run)
  done = json.load(open(os.path.join(out, 'checkpoints', sorted(
      os.listdir(os.path.join(out, 'checkpoints')))[-1], 'meta.json')))['round']
  assert done < 3, 'the run finished before it was killed'
  driver.run_experiment(_config(), out, resume=True, progress=False,
                        workers=two_workers.addresses)
  _assert_same_run(out, reference_cache)
