"""What every registered method's client parts can do is declared, and agrees with its
registry entry: one test over the whole registry, so a new method cannot forget it."""
import types

import helpers
import pytest

from tff_noisy import methods
from tff_noisy.federated.client_parts import ClientPart, ClientProgram, CrossEntropy, Needs


def _program(name):
  params = methods.resolve_params(name, {}, rounds=1000)
  setup = types.SimpleNamespace(num_classes=10, client_lr=0.1, seed=0, rounds=1000,
                                weight_decay=0.0, model_fn=lambda: helpers.linear_model(4, 10))
  return ClientProgram(methods.METHODS[name].resolve()(params, setup).parts)


@pytest.mark.parametrize('name', sorted(methods.METHODS))
def test_the_registry_and_the_client_parts_agree_on_devices(name):
  reason = _program(name).device_reason()
  assert bool(methods.METHODS[name].off_device) == bool(reason), (
      f"{name}: the registry says off_device={methods.METHODS[name].off_device!r}, its "
      f'client parts say {reason!r}')


def _declares_needs_below(part, point):
  """Whether ``needs`` is declared by the class that defines ``point`` or a subclass of it."""
  mro = type(part).__mro__
  owner = next(i for i, cls in enumerate(mro) if point in vars(cls))
  return any('needs' in vars(cls) for cls in mro[:owner + 1])


@pytest.mark.parametrize('name', sorted(methods.METHODS))
def test_a_stackable_part_declares_it_where_its_loss_and_batch_are_defined(name):
  # A part inheriting Needs(stackable=True) from a parent whose loss or batch it replaces
  # would be stacked on the parent's word, not its own.
  for part in _program(name).parts:
    if part.needs.stackable:
      for point in ('loss', 'batch'):
        assert _declares_needs_below(part, point), (
            f'{type(part).__name__} defines {point} but inherits Needs(stackable=True)')


def test_an_undeclared_loss_is_not_stacked():
  class Undeclared(ClientPart):
    def loss(self, batch, out, ctx):
      return out.logits[:, 0]

  class Declared(Undeclared):
    needs = Needs(stackable=True)

  class Inherits(Declared):
    pass

  class Replaced(CrossEntropy):  # Inherits CrossEntropy's declaration with a new loss.
    def loss(self, batch, out, ctx):
      return out.logits[:, 0]

  def stacked(part):
    return not ClientProgram([part]).unstackable_reason()

  assert stacked(CrossEntropy())
  assert not stacked(Undeclared())
  assert stacked(Declared()) and stacked(Inherits())
  assert _declares_needs_below(Inherits(), 'loss')
  assert not _declares_needs_below(Replaced(), 'loss')  # What the registry test refuses.
