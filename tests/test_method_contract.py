"""The method contract stays small, is read from declarations and composes by value
(docs/architecture.md)."""

import ast
import dataclasses
import importlib
import inspect
import os
import pkgutil
import re

import tff_noisy.methods
from tff_noisy import methods
from tff_noisy.federated.client_parts import ClientPart
from tff_noisy.methods import contract
from tff_noisy.methods import recipe

_ROOT = os.path.join(os.path.dirname(__file__), '..', 'tff_noisy')
_ENGINE = ('federated', 'runtime', 'simulation')


def _public_members(cls) -> set:
  return {name for name in vars(cls) if not name.startswith('_')}


def _engine_sources():
  for folder in _ENGINE:
    for root, _, names in os.walk(os.path.join(_ROOT, folder)):
      for name in names:
        if name.endswith('.py'):
          path = os.path.join(root, name)
          with open(path) as f:
            yield os.path.relpath(path, _ROOT), f.read()


def test_a_client_part_has_its_few_points_and_declarations():
  # Grows only by a deliberate change of this budget (and of the architecture page).
  assert _public_members(ClientPart) == {
      'needs', 'state_spec', 'hparams', 'device',  # Declarations.
      'initial_state', 'start', 'batch', 'loss', 'step', 'after_step', 'finish'}


def test_the_method_author_types_do_not_grow():
  # What an author overrides: a client part's points and declarations and a server
  # step's three (ClientObjective and Method had 42 together).
  assert _public_members(recipe.ServerStep) == {'prepare', 'before', 'after'}
  members = _public_members(ClientPart) | {f'ServerStep.{m}' for m in _public_members(
      recipe.ServerStep)}
  assert len(members) <= 16, sorted(members)


def test_a_recipe_has_its_few_slots():
  assert [f.name for f in dataclasses.fields(recipe.Recipe)] == [
      'parts', 'client_model', 'data', 'schedule', 'weighting', 'server', 'controller']
  assert [f.name for f in dataclasses.fields(recipe.DataPlan)] == [
      'fields', 'labels', 'kept', 'extras']
  assert [f.name for f in dataclasses.fields(recipe.Schedule)] == [
      'everyone', 'eligible', 'groups']


def test_every_author_name_comes_from_the_contract_module():
  for name in contract.__all__:
    assert getattr(contract, name) is not None
  assert {'ClientPart', 'Needs', 'Recipe', 'ServerStep', 'MethodSpec', 'Params',
          'register', 'Setup'} <= set(contract.__all__)


def _method_modules():
  for info in pkgutil.walk_packages(tff_noisy.methods.__path__, 'tff_noisy.methods.'):
    yield importlib.import_module(info.name)


def test_no_method_class_has_two_bases():
  for module in _method_modules():
    for _, cls in inspect.getmembers(module, inspect.isclass):
      if cls.__module__ == module.__name__ and not dataclasses.is_dataclass(cls):
        assert len(cls.__bases__) == 1, cls


def test_no_method_folder_imports_another():
  folders = {name for name in os.listdir(os.path.dirname(tff_noisy.methods.__file__))
             if os.path.isdir(os.path.join(os.path.dirname(tff_noisy.methods.__file__),
                                           name)) and not name.startswith('_')}
  assert {'fedavg', 'scaffold', 'moon', 'fedds', 'maskedoptim'} <= folders
  for folder in folders:
    root = os.path.join(os.path.dirname(tff_noisy.methods.__file__), folder)
    for name in os.listdir(root):
      if not name.endswith('.py'):
        continue
      with open(os.path.join(root, name)) as f:
        tree = ast.parse(f.read())
      for node in ast.walk(tree):
        names = ([node.module or ''] if isinstance(node, ast.ImportFrom) else
                 [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        if isinstance(node, ast.ImportFrom) and node.module == 'tff_noisy.methods':
          names = [f'tff_noisy.methods.{a.name}' for a in node.names]
        for imported in names:
          parts = imported.split('.')
          if parts[:2] == ['tff_noisy', 'methods'] and len(parts) > 2:
            assert parts[2] == folder or parts[2] not in folders, (folder, name, imported)


def test_no_engine_function_is_over_80_lines():
  for path, source in _engine_sources():
    for node in ast.walk(ast.parse(source)):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        assert node.end_lineno - node.lineno < 80, (path, node.name)


def test_every_registered_method_builds_a_recipe_by_name():
  for name, spec in methods.METHODS.items():
    assert isinstance(spec.target, str) and not spec.target.split(':')[1][0].isupper(), name


def test_the_engine_never_asks_which_methods_a_class_overrides():
  for path, source in _engine_sources():
    assert not re.search(r'getattr\(type\(\w+\), \w+\) is not getattr', source), path
    assert '__mro__' not in source, path


def test_one_engine_file_takes_a_gradient():
  opening = [path for path, source in _engine_sources() if 'GradientTape(' in source]
  assert opening == [os.path.join('federated', 'client_step.py')]


def test_client_parts_are_plain_classes_with_one_base():
  import tff_noisy.federated.client_parts as parts  # pylint: disable=g-import-not-at-top
  for _, cls in inspect.getmembers(parts, inspect.isclass):
    if issubclass(cls, ClientPart) and cls is not ClientPart:
      assert len(cls.__bases__) == 1, cls
