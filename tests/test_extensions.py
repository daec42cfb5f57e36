"""A method of the user's own package, run by the real command line: named by a config's
``imports``, by ``--import`` or by an installed entry point (group ``tff_noisy.methods``).
The package, written into a temporary directory, registers FedProx under another name
with ``tff_noisy.register_method``; each route trains it on digits for 1-2 rounds."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from experiments import run as cli
from tff_noisy import catalog
from tff_noisy import extensions
from tff_noisy import methods
from tff_noisy import registry
from tff_noisy.simulation import checkpoint

_ROOT = os.path.join(os.path.dirname(__file__), '..')
_METHOD = '''
    """FedProx under another name, registered from outside tff_noisy."""
    import tff_noisy
    from tff_noisy import methods
    from tff_noisy.methods.common import ProximalParams

    tff_noisy.register_method({'bootstrap': methods.MethodSpec(
        'FedProx under another name', ProximalParams,
        'tff_noisy.methods.fedavg.algorithm:fedprox')})
    '''
_CONFIG = '''
    seed: 3
    data: {dataset: digits}
    partition: {name: iid, num_clients: 4}
    noise: {name: symmetric, rate: 0.4, noisy_fraction: 0.5}
    model: {name: mlp, width: 16}
    method: {name: bootstrap, params: {mu: 0.1}}
    fl: {rounds: 2, participation: 0.5, client_runtime: tf, checkpoint_every: 1}
    '''


def _package(root, name, code=_METHOD):
  """``root/name/methods.py`` holding ``code``; returns the module's name."""
  (root / name).mkdir(parents=True)
  (root / name / '__init__.py').write_text('')
  (root / name / 'methods.py').write_text(textwrap.dedent(code))
  return f'{name}.methods'


def _config(path, extra=''):
  path.write_text(textwrap.dedent(extra) + textwrap.dedent(_CONFIG))
  return str(path)


def _fails(capfd, argv) -> str:
  """Runs the CLI; returns its one error line, without the prefix."""
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv)
  assert exit_info.value.code == 2
  err = capfd.readouterr().err
  assert err.count('\n') == 1 and err.startswith('tff-noisy: error: '), err
  return err[len('tff-noisy: error: '):].strip()


def _results(out):
  with open(os.path.join(out, 'results.json')) as f:
    return json.load(f)


def _use_registry(monkeypatch, methods_registry):
  """``methods_registry`` as the methods of configs and of ``tff-noisy list``."""
  monkeypatch.setattr(methods, 'METHODS', methods_registry)
  monkeypatch.setitem(catalog.SECTIONS, 'methods',
                      (methods_registry, *catalog.SECTIONS['methods'][1:]))


@pytest.fixture
def site(tmp_path, monkeypatch, tmp_cache):
  """A directory on the path for the user's packages; the registry, the imported
  packages and ``sys.path`` are restored after the test."""
  del tmp_cache
  directory = tmp_path / 'site'
  directory.mkdir()
  monkeypatch.setattr(sys, 'path', [str(directory)] + sys.path)
  _use_registry(monkeypatch, methods.METHODS.copy())
  before = set(sys.modules)
  yield directory
  for name in set(sys.modules) - before:
    if name.startswith('ext_'):
      del sys.modules[name]


def test_an_unknown_method_says_how_to_name_ones_own(capfd, site, tmp_path):
  message = _fails(capfd, ['run', _config(tmp_path / 'c.yaml'), '--out', str(tmp_path / 'o')])
  assert message.startswith("method.name: unknown method 'bootstrap' Allowed: fedavg, ")
  assert message.endswith(f'({extensions.IMPORTS_HINT})')
  assert "config's imports, or --import MODULE" in message


def test_a_config_s_imports_runs_the_method_and_a_resume_may_import_otherwise(
    capfd, site, tmp_path, monkeypatch):
  unregistered = methods.METHODS.copy()
  module = _package(site, 'ext_key')
  other = _package(site, 'ext_other', '"""Registers nothing."""\n')
  config = _config(tmp_path / 'c.yaml', f'imports: [{module}]\n')
  out = str(tmp_path / 'run')
  cli.main(['run', config, '--set', 'fl.rounds=1', '--out', out])
  assert 'bootstrap: final accuracy' in capfd.readouterr().out
  done = _results(out)
  assert done['method'] == 'bootstrap' and done['params'] == {'mu': 0.1}
  assert done['config']['imports'] == [module]  # Recorded like every config key.
  first = done['rounds']
  # Where the code is found may change on resume (the method and its parameters may not):
  # the same module by --import, beside another.
  moved = _config(tmp_path / 'moved.yaml', f'imports: [{other}]\n')
  cli.main(['run', moved, '--import', module, '--out', out, '--resume'])
  done = _results(out)
  assert done['config']['imports'] == [other, module]
  assert [part['rounds'] for part in done['runtime_parts']] == [[1, 1], [2, 2]]
  assert done['rounds'][:1] == first
  # The method's parameters stay the checkpoint's.
  capfd.readouterr()
  changed = _fails(capfd, ['run', moved, '--import', module, '--set', 'method.params.mu=0.2',
                            '--set', 'fl.rounds=3', '--out', out, '--resume'])
  assert 'belongs to another run (method.resolved.mu: checkpoint 0.1, this run 0.2' in changed
  # Imports that register no such method (as a new process without --import): refused
  # before any work, naming the way out.
  _use_registry(monkeypatch, unregistered)
  del sys.modules[module]
  message = _fails(capfd, ['run', moved, '--set', 'fl.rounds=3', '--out', out, '--resume'])
  assert message.startswith("method.name: unknown method 'bootstrap' Allowed: ")
  assert message.endswith(f'({extensions.IMPORTS_HINT})')
  assert len(_results(out)['rounds']) == 2
  # A finished run's recorded imports are imported again: evaluate needs no --import.
  cli.main(['evaluate', out])
  assert 'bootstrap: test accuracy' in capfd.readouterr().out
  assert module in sys.modules and 'bootstrap' in methods.METHODS


def test_a_checkpoint_s_identity_leaves_imports_out(site):
  del site
  from tff_noisy import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.from_dict({'fl': {'client_runtime': 'tf'}, 'imports': ['json']})
  assert not any(key.startswith('imports') for key in checkpoint.identity_of(config, []))
  assert checkpoint.identity_of(config, []) == checkpoint.identity_of(
      config_lib.from_dict({'fl': {'client_runtime': 'tf'}}), [])


def test_import_flag_is_recorded_and_a_grid_s_run_processes_import_it(
    capfd, site, tmp_path, monkeypatch):
  module = _package(site, 'ext_flag')
  other = _package(site, 'ext_flag_other', '"""Registers nothing."""\n')
  config = _config(tmp_path / 'c.yaml')
  out = str(tmp_path / 'grid')
  # --jobs 2: each run is a `tff-noisy run` process of its own, on the config file it
  # is given; it finds the module by the recorded imports alone (the path holds it).
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join([str(site), _ROOT]))
  cli.main(['grid', config, '--methods', 'bootstrap', '--seeds', '0', '--import', module,
            '--jobs', '2', '--out', out])
  done = _results(os.path.join(out, 'default', 'seed0', 'bootstrap'))
  assert done['method'] == 'bootstrap' and done['config']['imports'] == [module]
  assert len(done['rounds']) == 2
  assert 'bootstrap' in capfd.readouterr().out  # The grid's table.
  # --resume keeps the finished cell whatever the imports (the file's or the flag's).
  key = _config(tmp_path / 'key.yaml', f'imports: [{other}, {module}]\n')
  cli.main(['grid', key, '--methods', 'bootstrap', '--seeds', '0', '--out', out, '--resume'])
  assert '1 of 1 cells finished earlier with the same config: kept' in capfd.readouterr().err


def test_the_command_finds_a_module_in_the_current_directory(capfd, site, tmp_path,
                                                             monkeypatch):
  module = _package(tmp_path / 'here', 'ext_cwd')
  monkeypatch.chdir(tmp_path / 'here')
  monkeypatch.setattr(sys, 'path', [p for p in sys.path if p not in ('', os.getcwd())])
  cli.main(['list', 'methods', '--import', module])
  assert re.search('bootstrap +FedProx under another name', capfd.readouterr().out)
  del site


def test_a_module_that_cannot_be_imported_is_one_line_naming_the_key(capfd, site, tmp_path):
  out = str(tmp_path / 'o')
  message = _fails(capfd, ['run', _config(tmp_path / 'a.yaml', 'imports: [ext_missing]\n'),
                            '--out', out])
  assert message == "imports: cannot import module 'ext_missing': No module named 'ext_missing'"
  assert _fails(capfd, ['run', _config(tmp_path / 'b.yaml'), '--import', 'ext_missing.m',
                         '--out', out]) == (
      "--import: cannot import module 'ext_missing.m': No module named 'ext_missing'")
  broken = _package(site, 'ext_broken', 'import json\nraise ValueError("no\\nway")\n')
  message = _fails(capfd, ['list', '--import', broken])
  assert message == (f"--import: cannot import module '{broken}': ValueError: no way "
                     f"({site / 'ext_broken' / 'methods.py'}, line 2)")
  assert _fails(capfd, ['run', _config(tmp_path / 'c.yaml', 'imports: ext_key\n'),
                         '--out', out]) == "imports: expected a list, got 'ext_key'"
  assert _fails(capfd, ['run', _config(tmp_path / 'd.yaml', 'imports: [my-pkg]\n'),
                         '--out', out]) == (
      "imports: expected module names such as my_pkg.methods, got 'my-pkg'")
  taken = _package(site, 'ext_taken', _METHOD.replace("'bootstrap'", "'fedprox'"))
  assert _fails(capfd, ['list', '--import', taken]).startswith(
      f"--import: cannot import module '{taken}': ValueError: name: method 'fedprox' is "
      'registered already (')
  config = _config(tmp_path / 'e.yaml')
  for command in (['run', config, '--out', out], ['data', 'build', config],
                  ['compare', config, '--methods', 'fedavg', '--out', out],
                  ['grid', config, '--methods', 'fedavg', '--out', out],
                  ['reproduce', 'fedds', '--out', out], ['list'], ['report', out]):
    assert _fails(capfd, command + ['--import', 'ext_missing']).startswith(
        "--import: cannot import module 'ext_missing'"), command
  assert not os.path.exists(out)  # Refused before any work.


def _distribution(site, name, entry_points):
  """An installed distribution's metadata: ``site/NAME-0.1.dist-info``."""
  info = site / f'{name}-0.1.dist-info'
  info.mkdir()
  (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n')
  (info / 'entry_points.txt').write_text(textwrap.dedent(entry_points))


def _discovering_registry(monkeypatch):
  """The methods registry as a fresh process has it: its entry points not imported yet."""
  _use_registry(monkeypatch, registry.Registry(
      'method.name', 'method', dict(methods.METHODS), methods.MethodSpec,
      discover=extensions.import_entry_points, unknown_hint=extensions.IMPORTS_HINT))


def test_an_entry_point_s_module_is_imported_when_the_registry_is_first_used(
    capfd, site, monkeypatch):
  module = _package(site, 'ext_listed')
  _distribution(site, 'ext-listed', f'''
      [tff_noisy.methods]
      bootstrap = {module}
      ''')
  _discovering_registry(monkeypatch)
  assert module not in sys.modules
  cli.main(['list', 'methods'])
  assert re.search('bootstrap +FedProx under another name', capfd.readouterr().out)
  assert module in sys.modules and 'bootstrap' in methods.METHODS


def test_an_entry_point_that_cannot_be_imported_names_its_package(capfd, site, monkeypatch):
  _distribution(site, 'ext-gone', '''
      [tff_noisy.methods]
      gone = ext_gone.methods
      ''')
  _discovering_registry(monkeypatch)
  assert _fails(capfd, ['list', 'methods']) == (
      "entry point 'gone = ext_gone.methods' (tff_noisy.methods, package ext-gone 0.1): "
      "cannot import module 'ext_gone.methods': No module named 'ext_gone'")
  assert _fails(capfd, ['list', 'methods']).startswith("entry point 'gone")  # Each use.


def test_the_command_runs_an_installed_entry_point_s_method(site, tmp_path):
  module = _package(site, 'ext_installed')
  _distribution(site, 'ext-installed', f'''
      [tff_noisy.methods]
      bootstrap = {module}
      ''')
  out = tmp_path / 'run'
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), _ROOT]))
  done = subprocess.run([sys.executable, '-m', 'experiments.run', 'run',
                         _config(tmp_path / 'c.yaml'), '--out', str(out)],
                        env=env, capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr
  assert 'bootstrap: final accuracy' in done.stdout
  results = _results(out)
  assert results['method'] == 'bootstrap' and results['config']['imports'] == []
  assert len(results['rounds']) == 2
