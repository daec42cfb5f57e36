"""SCAFFOLD, MOON and FedCorr as the user's own package: each folder, copied out of the
tree under other names, imports only the public method contract (``methods.contract``,
the TensorFlow-free ``methods.common`` and ``methods.noisy_clients``, ``params`` and the
maths in ``ops``), registers through ``methods.register`` and trains exactly as the
in-tree method."""
import ast
import os
import shutil
import sys

import pytest

from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy.simulation import driver

_METHODS = os.path.join(os.path.dirname(__file__), '..', 'tff_noisy', 'methods')
_PUBLIC = ('tff_noisy.methods.contract', 'tff_noisy.methods.common',
           'tff_noisy.methods.noisy_clients', 'tff_noisy.params', 'tff_noisy.ops.')
_COPIED = ('scaffold', 'moon', 'fedcorr')


def _imports(path):
  with open(path) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.level == 0:
      yield from (f'{node.module}.{a.name}' for a in node.names)
    elif isinstance(node, ast.Import):
      yield from (a.name for a in node.names)


@pytest.fixture
def own_package(tmp_path, monkeypatch, tmp_cache):
  """``own_methods``: the three folders under names of their own, registered as
  ``own_<name>``; the registry and the imported modules are restored after the test."""
  del tmp_cache
  package = tmp_path / 'own_methods'
  package.mkdir()
  for name in _COPIED:
    shutil.copytree(os.path.join(_METHODS, name), package / name,
                    ignore=shutil.ignore_patterns('__pycache__'))
    for path in (package / name).glob('*.py'):
      path.write_text(path.read_text().replace(f'tff_noisy.methods.{name}',
                                               f'own_methods.{name}'))
  (package / '__init__.py').write_text(
      'from tff_noisy import methods\n'
      + ''.join(f'from own_methods import {name}\n' for name in _COPIED)
      + 'methods.register({f"own_{key}": spec for folder in (' + ', '.join(_COPIED)
      + ') for key, spec in folder.SPECS.items()})\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setattr(methods, 'METHODS', methods.METHODS.copy())
  before = set(sys.modules)
  __import__('own_methods')
  yield package
  for module in set(sys.modules) - before:
    if module.startswith('own_methods'):
      del sys.modules[module]


def test_the_copied_folders_import_only_the_public_contract(own_package):
  for name in _COPIED:
    for path in (own_package / name).glob('*.py'):
      for imported in _imports(path):
        if imported.startswith('tff_noisy'):
          assert imported.startswith(_PUBLIC), (path.name, imported)
  for name in _COPIED:
    assert methods.METHODS[f'own_{name}'].resolve().__module__ == (
        f'own_methods.{name}.algorithm')


def _config(method, params):
  return config_lib.from_dict({
      'seed': 3, 'data': {'dataset': 'digits'},
      'partition': {'name': 'iid', 'num_clients': 6},
      'noise': {'name': 'symmetric', 'rate': 0.4, 'noisy_fraction': 0.5},
      'model': {'name': 'mlp'}, 'method': {'name': method, 'params': params},
      'fl': {'rounds': 4, 'clients_per_round': 3, 'batch_size': 32, 'client_lr': 0.05,
             'client_runtime': 'tf', 'eval_every': 1}})


@pytest.mark.slow
@pytest.mark.parametrize('name, params', [
    ('scaffold', {}), ('moon', {'mu': 1.0}),
    ('fedcorr', {'t1': 2, 't2': 1, 't3': 1, 'frac1': 0.5}),
])
def test_an_out_of_tree_copy_trains_as_the_in_tree_method(own_package, name, params):
  del own_package

  def curve(method):
    rounds = driver.run_experiment(_config(method, params), None, progress=False).rounds
    return [(r['test_accuracy'], r['train_loss']) for r in rounds]

  assert curve(f'own_{name}') == curve(name)
