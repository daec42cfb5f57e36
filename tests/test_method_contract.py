"""The method contract stays small and is read from declarations (docs/architecture.md)."""

import inspect
import os
import re

from tff_noisy.federated.client_parts import ClientPart
from tff_noisy.methods import base
from tff_noisy.methods import contract

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
  # ClientObjective and Method had 42 members together; the server side's hooks remain.
  members = _public_members(ClientPart) | {f'Method.{m}' for m in _public_members(
      base.Method)}
  assert len(members) <= 30, sorted(members)


def test_every_author_name_comes_from_the_contract_module():
  for name in contract.__all__:
    assert getattr(contract, name) is not None
  assert {'ClientPart', 'Needs', 'Method', 'MethodSpec', 'Params', 'register'} <= set(
      contract.__all__)


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
