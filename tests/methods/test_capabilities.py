"""What every registered method's client objective can do is declared, and agrees with its
registry entry: one test over the whole registry, so a new method cannot forget it."""
import types

import helpers
import pytest

from tff_noisy import methods
from tff_noisy.federated.objectives.base import ClientObjective


def _objective(name):
  params = methods.resolve_params(name, {}, rounds=1000)
  setup = types.SimpleNamespace(num_classes=10, client_lr=0.1,
                                model_fn=lambda: helpers.linear_model(4, 10))
  return methods.METHODS[name].resolve().objective(params, setup)


@pytest.mark.parametrize('name', sorted(methods.METHODS))
def test_the_registry_and_the_objective_agree_on_devices(name):
  reason = _objective(name).device_unsupported_reason()
  assert bool(methods.METHODS[name].off_device) == bool(reason), (
      f"{name}: the registry says off_device={methods.METHODS[name].off_device!r}, its "
      f'objective says {reason!r}')


@pytest.mark.parametrize('name', sorted(methods.METHODS))
def test_an_objective_with_its_own_loss_declares_whether_it_is_per_example(name):
  objective = _objective(name)
  owner = next(cls for cls in type(objective).__mro__ if 'loss' in vars(cls))
  declared = [cls for cls in type(objective).__mro__[:type(objective).__mro__.index(owner) + 1]
              if 'per_example_loss' in vars(cls)]
  assert declared, f'{type(objective).__name__} defines loss but not per_example_loss'


def test_an_undeclared_loss_is_not_stacked():
  class Undeclared(ClientObjective):
    def loss(self, batch, logits, features, context, hparams, rows):
      return super().loss(batch, logits, features, context, hparams, rows)

  class Declared(Undeclared):
    per_example_loss = True

  class Inherits(Declared):
    pass

  assert ClientObjective().loss_is_per_example()
  assert not Undeclared().loss_is_per_example()
  assert Declared().loss_is_per_example() and Inherits().loss_is_per_example()
