"""`tff-noisy list`: every registry key, defaults equal to the registries', no TensorFlow."""
import dataclasses
import os
import subprocess
import sys

import pytest

from experiments import run as cli
from tff_noisy import catalog
from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import zoo
from tff_noisy.data import noise
from tff_noisy.data import params as data_params
from tff_noisy.data import partition
from tff_noisy.data import sources
from tff_noisy.embeddings.params import ENCODERS
from tff_noisy.errors import UserError
from tff_noisy.federated import aggregators
from tff_noisy.ops import faults
from tff_noisy.params import described

_ROOT = os.path.join(os.path.dirname(__file__), '..')
_REGISTRIES = {
    'methods': methods.METHODS,
    'aggregators': aggregators.AGGREGATORS,
    'models': zoo.MODELS,
    'datasets': sources.DATASETS,
    'noise': noise.NOISE_MODELS,
    'partitions': partition.PARTITIONS,
    'faults': faults.BEHAVIOURS,
    'runtimes': config_lib.CLIENT_RUNTIMES,
    'encoders': ENCODERS,
}


def _block(text: str, name: str) -> list:
  """The lines of choice ``name``: its own and its parameters' (indented deeper)."""
  lines = text.splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith(f'  {name} '))
  block = [lines[start]]
  for line in lines[start + 1:]:
    if not line.startswith('   '):
      break
    block.append(line.strip())
  return block


def test_sections_are_the_registries():
  assert list(catalog.SECTIONS) == list(_REGISTRIES)


@pytest.mark.parametrize('name', list(_REGISTRIES))
def test_each_section_lists_every_key_with_a_summary(name):
  section = catalog.section(name)
  assert [c.name for c in section.choices] == list(_REGISTRIES[name])
  assert all(c.summary for c in section.choices)
  text = catalog.render(name)
  assert text.splitlines()[0].startswith(f'{name} (')
  for key in _REGISTRIES[name]:
    assert _block(text, key)


def test_render_without_a_section_has_them_all():
  text = catalog.render()
  assert text == '\n\n'.join(catalog.render(name) for name in catalog.SECTIONS)


def _defaults(cls) -> dict:
  return {f.name: f.default for f in dataclasses.fields(cls)}


def test_method_parameters_and_defaults_are_the_dataclasses():
  for choice in catalog.section('methods').choices:
    shown = {p.name: p.default for p in choice.params}
    assert shown == _defaults(methods.METHODS[choice.name].params)


@pytest.mark.parametrize('method, setting, comment', [
    ('fedprox', 'mu: 0.01', 'FedProx proximal strength (Li et al. 2020, Eq. 2).'),
    ('fedln_nnc', 'k: 100', 'Neighbours in the vote'),
    ('fedln_nnc', 'encoder_input_size: null', 'a hub encoder expects'),
    ('fedln_nafedavg', 'score_range: [-50.0, 150.0]', 'histogram range'),
    ('fedds', 'tol: 1e-05', 'Stop when no posterior changes by more.'),
    ('fedds', 'em: central', "'federated': clients label the public set"),  # Next line's.
    ('lsc', 'exclude_self: true', 'Eq. 2 as written'),
    ('fedefc', 'normalise: column', "'row' (ablation)"),
])
def test_a_parameter_line_shows_the_default_and_the_fields_comment(method, setting, comment):
  line = next(line for line in _block(catalog.render('methods'), method)[1:]
              if line.startswith(setting.split(':')[0] + ':'))
  written, described = line.split('  # ')
  assert written.strip() == setting
  assert comment in described
  name, _ = setting.split(':')
  assert catalog.value_text(_defaults(methods.METHODS[method].params)[name]) == (
      setting.split(': ')[1])


def test_fedavg_has_no_parameters_and_fedds_says_it_needs_a_public_split():
  assert _block(catalog.render('methods'), 'fedavg') == [
      '  fedavg              FedAvg (baseline)']
  assert 'needs data.public_fraction > 0' in _block(catalog.render('methods'), 'fedds')[0]


def test_aggregator_defaults_are_the_registrys():
  for choice in catalog.section('aggregators').choices:
    assert {p.name: p.default for p in choice.params} == dataclasses.asdict(
        aggregators.AGGREGATORS[choice.name].params())
  assert _block(catalog.render('aggregators'), 'multi_krum')[1:] == [
      'f: 1  # Byzantine clients tolerated.', 'm: 2  # Clients averaged, in [1, n - f].']


def test_model_options_and_defaults():
  block = _block(catalog.render('models'), 'resnet20')
  assert block[1].startswith('norm: group  # ')
  assert _block(catalog.render('models'), 'small_cnn')[1:] == []


def test_noise_models_show_the_fields_they_read_with_noiseconfig_defaults():
  defaults = _defaults(config_lib.NoiseConfig)
  used = set()
  for choice in catalog.section('noise').choices:
    assert tuple(p.name for p in choice.params) == data_params.field_names(
        noise.NOISE_MODELS[choice.name].params)
    assert all(p.default == defaults[p.name] for p in choice.params)
    used.update(p.name for p in choice.params)
  assert used == set(defaults) - {'name'}  # Every field belongs to some model.
  last = _block(catalog.render('noise'), 'cleanlab')[-1]
  assert last.split('  # ')[0].strip() == 'valid_matrix: false' and 'learnability' in last


def test_datasets_show_classes_input_and_real_label_columns():
  line = _block(catalog.render('datasets'), 'cifar10_n')[0]
  assert '10 classes, input 32x32x3: ' in line
  assert 'noise.real_labels: aggre_label, worse_label' in line


def test_partitions_show_the_fields_each_reads():
  text = catalog.render('partitions')
  assert 'Random equal split' in _block(text, 'iid')[0]
  reads = {c.name: {p.name: p.default for p in c.params}
           for c in catalog.section('partitions').choices}
  defaults = _defaults(config_lib.PartitionConfig)
  assert reads['iid'] == {'num_clients': defaults['num_clients']}
  assert reads['shards'] == {k: defaults[k] for k in ('num_clients', 'shards_per_client')}
  assert set().union(*reads.values()) == set(defaults) - {'name'}
  assert 'alpha: 0.5       # dirichlet / fedcorr concentration.' in _block(text, 'dirichlet')


def test_field_helps_are_the_fields_metadata():

  @dataclasses.dataclass
  class Base:
    a: int = described(1, 'The first.')
    b: str = 'x'  # A comment is not help.

  @dataclasses.dataclass
  class Child(Base):
    c: dict = described(text='A mapping.', default_factory=dict)

  assert catalog.field_helps(Child) == {'a': 'The first.', 'b': '', 'c': 'A mapping.'}
  assert Child().c == {} and Child().c is not Child().c


def test_every_registered_parameter_has_help():
  for name in catalog.SECTIONS:
    for choice in catalog.section(name).choices:
      for param in choice.params:
        assert param.description, f'{name}: {choice.name}.{param.name} has no help'


@pytest.mark.parametrize('name, hint', [('modles', "; did you mean 'models'?"), ('xyz', '')])
def test_unknown_section_names_the_allowed_ones(name, hint):
  with pytest.raises(UserError) as error:
    catalog.section(name)
  assert str(error.value) == (f"list: unknown section '{name}'{hint} Allowed: methods, "
                              'aggregators, models, datasets, noise, partitions, faults, '
                              'runtimes, encoders, config')


def test_cli_list(capsys):
  cli.main(['list', 'models'])
  out = capsys.readouterr().out
  assert out == catalog.render('models') + '\n'
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['list', 'model'])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == (
      "tff-noisy: error: list: unknown section 'model'; did you mean 'models'? Allowed: "
      'methods, aggregators, models, datasets, noise, partitions, faults, runtimes, encoders, '
      'config\n')
  cli.main(['list', 'config'])
  assert capsys.readouterr().out == catalog.config_defaults() + '\n'
  cli.main(['list', '--markdown'])
  assert capsys.readouterr().out == catalog.reference_markdown()
  with pytest.raises(SystemExit):
    cli.main(['list', 'models', '--markdown'])
  assert 'list --markdown: the whole reference, no SECTION' in capsys.readouterr().err


def test_list_imports_no_tensorflow():
  code = ('import sys\nfrom experiments import run\nrun.main(["list"])\n'
          'print("tensorflow" in sys.modules)')
  done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                        timeout=60, cwd=_ROOT, check=True)
  assert done.stdout.splitlines()[-1] == 'False'
  assert done.stdout.startswith('methods (method.name')


def test_the_configuration_reference_is_current():
  path = os.path.join(os.path.dirname(__file__), '..', catalog.REFERENCE)
  with open(path) as f:
    committed = f.read()
  assert committed == catalog.reference_markdown(), (
      f'{catalog.REFERENCE} is stale: regenerate it with '
      f'`.venv/bin/tff-noisy list --markdown > {catalog.REFERENCE}`')
