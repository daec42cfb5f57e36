"""The code's layers (docs/architecture.md, "Layers"): every import, at module level or
inside a function, goes to the importer's layer or one below it, and the client
runtimes are imported only where a run is assembled."""

import ast
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), '..')
PACKAGES = ('tff_noisy', 'models', 'tflite_export', 'experiments')

# Bottom to top. A module belongs to the longest prefix listed (``tff_noisy.reporting``
# alone is the report's building blocks, which method folders draw with).
LAYERS = (
    ('foundations', ('tff_noisy.errors', 'tff_noisy.params', 'tff_noisy.registry',
                     'tff_noisy.files', 'tff_noisy.yamlio', 'tff_noisy.cuda', 'tff_noisy.device',
                     'tff_noisy.tff_runtime', 'tff_noisy.reporting', 'tff_noisy.extensions',
                     'tff_noisy.native_log')),
    ('maths and tables', ('tff_noisy.ops', 'tff_noisy.zoo', 'tff_noisy.diagnostics',
                          'tff_noisy.workers', 'tff_noisy.worker_front',
                          'tff_noisy.worker_tls')),
    ('configuration', ('tff_noisy.config', 'tff_noisy.remote')),
    ('data, models, encoders', ('tff_noisy.data', 'models', 'tff_noisy.embeddings')),
    ('federated computations', ('tff_noisy.federated',)),
    ('methods', ('tff_noisy.methods',)),
    ('device training', ('tflite_export',)),
    ('validation', ('tff_noisy.validation',)),
    ('client runtimes', ('tff_noisy.runtime',)),
    ('simulation', ('tff_noisy.simulation',)),
    ('public surface', ('tff_noisy.report',
                        'tff_noisy.reproduce', 'tff_noisy.catalog', 'tff_noisy.api',
                        'tff_noisy.aggregators', 'tff_noisy')),
    ('command line', ('experiments',)),
)
# Where a run is assembled: the one place above the runtimes that imports them.
RUNTIME_IMPORTERS = ('tff_noisy.simulation.assembly',)


def _layer_of(module: str) -> int:
  best, rank = '', None
  for index, (_, prefixes) in enumerate(LAYERS):
    for prefix in prefixes:
      if (module == prefix or module.startswith(prefix + '.')) and len(prefix) > len(best):
        best, rank = prefix, index
  if rank is None:
    raise AssertionError(f'{module} is in no layer of LAYERS')
  return rank


def _modules():
  for package in PACKAGES:
    for directory, _, files in os.walk(os.path.join(ROOT, package)):
      for name in sorted(files):
        if name.endswith('.py'):
          path = os.path.join(directory, name)
          module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, '.')
          yield re.sub(r'\.__init__$', '', module), path


def _imports(path: str, module: str):
  """The project modules ``path`` imports (``from a import b`` counts as ``a.b`` when b
  is a module, else ``a``)."""
  for node in ast.walk(ast.parse(open(path).read())):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:  # Relative: resolve against the importing package.
        parts = module.split('.')[:-node.level + (1 if path.endswith('__init__.py') else 0)
                                  or None]
        base = '.'.join(parts + ([base] if base else []))
      names = [f'{base}.{alias.name}' if _is_module(f'{base}.{alias.name}') else base
               for alias in node.names]
    else:
      continue
    for name in names:
      if name.split('.')[0] in PACKAGES:
        yield name


def _is_module(name: str) -> bool:
  path = os.path.join(ROOT, *name.split('.'))
  return os.path.isfile(path + '.py') or os.path.isdir(path)


def _violations():
  found = []
  for module, path in _modules():
    rank = _layer_of(module)
    for imported in _imports(path, module):
      if _layer_of(imported) > rank:
        found.append(f'{module} ({LAYERS[rank][0]}) imports {imported} '
                     f'({LAYERS[_layer_of(imported)][0]})')
      if (imported.startswith('tff_noisy.runtime') and not module.startswith('tff_noisy.runtime')
          and module not in RUNTIME_IMPORTERS):
        found.append(f'{module} imports the client runtimes ({imported}); only '
                     f'{", ".join(RUNTIME_IMPORTERS)} may')
  return found


def test_every_import_goes_down_the_layers():
  assert _violations() == []


def test_the_check_sees_an_import_running_up():
  """The rule fails when a lower layer imports a higher one (here: the federated
  computations importing a client runtime, as the methods once did)."""
  assert _layer_of('tff_noisy.federated.client_work') < _layer_of('tff_noisy.runtime.stacked')
  assert _layer_of('tff_noisy.reporting') < _layer_of('tff_noisy.methods.lsc.report')
  assert _layer_of('tff_noisy.report.command') > _layer_of('tff_noisy.simulation.driver')
  with pytest.raises(AssertionError, match='in no layer'):
    _layer_of('numpy')


def test_the_drawing_in_the_architecture_page_is_these_layers():
  text = open(os.path.join(ROOT, 'docs', 'architecture.md')).read()
  drawing = text.split('<!-- layers -->\n```\n')[1].split('\n```')[0]
  assert drawing == drawing_of_layers(), (
      'docs/architecture.md "Layers" differs from tests/test_layers.py LAYERS; paste:\n'
      + drawing_of_layers())


def drawing_of_layers() -> str:
  """The layers top to bottom, as the architecture page draws them."""
  lines = []
  for name, prefixes in reversed(LAYERS):
    lines.append(f'{name:<24} {", ".join(prefixes)}')
  return '\n'.join(lines)
