"""The architecture page's "How to add a method" example is real code: import it and use
it."""
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from tff_noisy import methods
from tff_noisy.errors import ConfigError
from tff_noisy.federated.client_parts import ClientProgram
from tff_noisy.methods import contract

_PAGE = os.path.join(os.path.dirname(__file__), '..', 'docs', 'architecture.md')


@pytest.fixture
def taylor(tmp_path, monkeypatch):
  with open(_PAGE) as f:
    section = f.read().split('## How to add a method', 1)[1]
  code = re.search(r'```python\n(.*?)```', section, re.S).group(1)
  assert len(code.strip().splitlines()) < 40  # The page promises a method in < 40 lines.
  package = tmp_path / 'my_package'
  package.mkdir()
  (package / '__init__.py').write_text('')
  (package / 'taylor.py').write_text(code)
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setattr(methods, 'METHODS', methods.METHODS.copy())  # Undo the registration.
  __import__('my_package.taylor')
  yield sys.modules['my_package.taylor']
  for name in ('my_package.taylor', 'my_package'):
    sys.modules.pop(name, None)


def test_the_example_method_registers_validates_and_computes_its_loss(taylor):
  assert methods.METHODS['taylor_ce'].resolve() is taylor.taylor
  assert methods.resolve_params('taylor_ce', {}, rounds=5).order == 2
  with pytest.raises(ConfigError, match='method.params.order: needs an integer >= 1'):
    methods.resolve_params('taylor_ce', {'order': 0}, rounds=5)
  with pytest.raises(ConfigError, match='method.params.order: needs an integer'):
    methods.resolve_params('taylor_ce', {'order': 1.5}, rounds=5)
  parts = taylor.taylor(methods.resolve_params('taylor_ce', {'order': 3}, rounds=5),
                       None).parts
  logits = tf.constant([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
  labels = np.array([0, 2])
  gap = 1 - tf.nn.softmax(logits).numpy()[[0, 1], labels]
  got = parts[0].loss({'y': labels}, contract.Outputs(logits), None).numpy()
  np.testing.assert_allclose(got, gap + gap ** 2 / 2 + gap ** 3 / 3, rtol=1e-5)
  program = ClientProgram(parts)  # Its declarations: stacked, and on devices.
  assert program.unstackable_reason() == '' and program.device_reason() == ''


def test_the_example_imports_only_the_public_contract():
  with open(_PAGE) as f:
    section = f.read().split('## How to add a method', 1)[1]
  code = re.search(r'```python\n(.*?)```', section, re.S).group(1)
  imported = set(re.findall(r'^(?:from|import) (tff_noisy[\w.]*)', code, re.M))
  assert imported == {'tff_noisy.methods'}
  assert 'from tff_noisy.methods import contract' in code
