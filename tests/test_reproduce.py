"""``tff-noisy reproduce``: protocols as data, the plan they give ``studies.grid``, the
up-front check of the paper scale, and the report beside the paper's numbers. A toy
protocol in a temporary directory; ``run`` is a stand-in writing results.json."""
import glob
import os
import textwrap

import pytest

from tff_noisy import reporting
from tff_noisy import reproduce
from tff_noisy.errors import ConfigError
from tff_noisy.report import paper_table
from tff_noisy.report import command as report
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import studies

_PROTOCOL = '''
paper: toy
baseline: fedavg
citation: "A. Author, A toy paper, 2026"
method_set: {fedprox: ["fl.aggregator=coordinate_median"]}
tables:
  table2:
    cite: "Table 2"
    caption: "Accuracy under symmetric noise"
    metric: best
    metric_note: "the best test accuracy over the rounds (Sec. 5)"
    paper_scale: {dataset: cifar10, model: resnet18, clients: 100, rounds: 120,
                  partition: ["partition.name=iid"]}
    methods: {fedavg: "FedAvg", fedprox: "FedProx"}
    settings:
      - {id: sym0.2, label: "Sym. 0.2", overrides: ["noise.name=symmetric", "noise.rate=0.2"]}
      - {id: sym0.6, label: "Sym. 0.6", overrides: ["noise.name=symmetric", "noise.rate=0.6"]}
    paper_numbers:
      sym0.2: {fedavg: {value: 80.0, std: 0.5}, fedprox: 82.5}
      sym0.6: {fedavg: 50.0, fedprox: 48.0}
scales:
  table2:
    cpu:
      config: experiments/configs/demo.yaml
      set: ["fl.rounds=3", "method.params={}"]
      seeds: [0, 1]
      minutes_per_cell: 0.5
      note: "digits, 10 clients (toy)"
    paper:
      config: experiments/configs/demo.yaml
      set: ["method.params={}"]
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
  (tmp_path / 'toy.yaml').write_text(textwrap.dedent(_PROTOCOL))
  monkeypatch.setattr(reproduce, 'PROTOCOL_DIR', str(tmp_path))
  return reproduce.table_of('toy', None)


def test_a_protocol_loads_with_its_papers_numbers_and_scales(toy):
  assert reproduce.papers() == ['toy']
  assert toy.settings == {'sym0.2': 'Sym. 0.2', 'sym0.6': 'Sym. 0.6'}
  assert toy.paper_numbers['sym0.2'] == {'fedavg': 80.0, 'fedprox': 82.5}
  assert toy.scales['cpu'].settings['sym0.6'] == ['noise.name=symmetric', 'noise.rate=0.6']
  assert toy.scales['paper'].overrides[:4] == [
      'data.dataset=cifar10', 'model.name=resnet18', 'partition.num_clients=100',
      'fl.rounds=120']
  listing = reproduce.listing()
  assert '--table table2: Table 2, 2 settings x 2 methods; metric best' in listing
  assert '--scale cpu: 8 cells (2 seeds); ~0.5 min per cell' in listing
  assert reproduce.listing('toy') == listing
  with pytest.raises(ConfigError, match="unknown paper 'tyo'"):
    reproduce.listing('tyo')
  with pytest.raises(ConfigError, match="unknown paper 'tyo'; did you mean 'toy'"):
    reproduce.load('tyo')
  with pytest.raises(ConfigError, match="--table: 'toy' has no table 'table3'"):
    reproduce.table_of('toy', 'table3')


def test_the_paper_scale_is_refused_up_front_without_its_dataset(toy, monkeypatch):
  monkeypatch.setenv('TFDS_DATA_DIR', os.devnull)
  with pytest.raises(ConfigError, match=r'^--scale paper: .*cifar10'):
    reproduce.plan(toy, 'paper')


def test_a_method_s_own_overrides_and_the_command_s_apply_to_its_runs(toy):
  plan = reproduce.plan(toy, 'cpu', extra=['fl.client_runtime=tf'])
  assert plan.method_overrides == {'fedprox': ['fl.aggregator=coordinate_median']}
  runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings,
                           plan.seeds, plan.method_overrides)
  assert {(r.method, r.config.fl.aggregator, r.config.fl.client_runtime) for r in runs} == {
      ('fedavg', 'mean', 'tf'), ('fedprox', 'coordinate_median', 'tf')}
  assert {r.config.noise.rate for r in runs} == {0.2, 0.6}  # The settings still apply.
  study = toy.study('cpu', ['fl.client_runtime=tf'])
  assert study['extra_overrides'] == ['fl.client_runtime=tf']
  assert study['method_overrides'] == plan.method_overrides


def test_the_paper_s_participation_wins_over_the_config_s_clients_per_round(tmp_path,
                                                                           monkeypatch):
  protocol = _PROTOCOL.replace('clients: 100, rounds: 120', 'clients: 100, rounds: 120, '
                               'participation: 0.1')
  (tmp_path / 'toy.yaml').write_text(textwrap.dedent(protocol))
  monkeypatch.setattr(reproduce, 'PROTOCOL_DIR', str(tmp_path))
  overrides = reproduce.table_of('toy', None).scales['paper'].overrides
  assert overrides.index('fl.participation=0.1') < overrides.index(
      'fl.clients_per_round=null')


def test_the_report_sets_our_cells_beside_the_papers(toy, tmp_path):
  config_path, overrides, methods, settings, seeds, _ = reproduce.plan(toy, 'cpu')
  accuracy = {('fedavg', 'sym0.2'): 0.70, ('fedprox', 'sym0.2'): 0.74,
              ('fedavg', 'sym0.6'): 0.40, ('fedprox', 'sym0.6'): 0.44}

  def run(config, out, choices):
    setting = 'sym0.2' if config.noise.rate == 0.2 else 'sym0.6'
    slope = 0.02 if config.method.name == 'fedprox' else 0.01  # Gaps differ per seed.
    best = accuracy[(config.method.name, setting)] + slope * config.seed
    results = results_lib.Results(
        config=config.to_dict(), data_hash=config.data_hash(), method=config.method.name,
        params={}, rounds=[{'round': 1, 'test_accuracy': best},
                           {'round': 2, 'test_accuracy': best - 0.1}],
        client_noise_rates={})
    results_lib.write(out, results)
    return results

  out = tmp_path / 'out'
  out.mkdir()
  studies.grid(config_path, overrides, methods, settings, seeds, str(out), run,
               paper=toy.study('cpu'))
  text = open(report.write_report(str(out))[0]).read()
  assert '## Beside the paper: toy Table 2' in text
  assert '`fedprox` runs with `fl.aggregator=coordinate_median`' in text
  # Best round, mean ± std over seeds 0 and 1 (0.70, 0.71), beside the paper's 80.00.
  assert '| Sym. 0.2 | fedavg (FedAvg) | 80.00 | 70.50 ± 0.50 | 65.50 ± 0.50 | 2 |' in text
  # The paper's gap, ours, and ours per seed (each against FedAvg's run of that seed).
  assert '| Sym. 0.6 | fedprox | -2.00 | +4.50 | 0.50 | 0: +4.00, 1: +5.00 | 2 of 2 |' in text
  assert '| Sym. 0.6 | fedavg > fedprox | fedprox > fedavg | no |' in text
  assert '| Sym. 0.2 | fedprox > fedavg | fedprox > fedavg | yes |' in text
  # FedAvg falls 10 points from its best round to its last: the papers' regime, just.
  assert '| Sym. 0.2 | 70.50 ± 0.50 | 60.50 ± 0.50 | 10.0 | yes |' in text
  # A grid under way: FedProx's seed 1 not run yet. Its gap is over seed 0 alone, not
  # its one seed against FedAvg's two (74.00 - 70.50).
  os.rename(out / 'sym0.2' / 'seed1' / 'fedprox', tmp_path / 'not_yet')
  text = open(report.write_report(str(out))[0]).read()
  assert '| Sym. 0.2 | fedprox (FedProx) | 82.50 | 74.00 | 69.00 | 1 |' in text
  assert '| Sym. 0.2 | fedprox | +2.50 | +4.00 | 0.00 | 0: +4.00 | 1 of 1 |' in text


def test_an_unstated_metric_is_reported_in_the_protocols_reading(toy, tmp_path, monkeypatch):
  """FedEFC's tables do not say which round; the protocol reads them as the final round,
  and the report's headline, gaps and ranking use it, with last-10 and best beside."""
  protocol = textwrap.dedent(_PROTOCOL).replace(
      '    metric: best\n', '    metric: unstated\n    metric_reading: final\n')
  (tmp_path / 'toy.yaml').write_text(protocol)
  table = reproduce.table_of('toy', None)
  assert table.metric_reading == 'final' and table.study('cpu')['metric_reading'] == 'final'
  assert 'metric unstated (read as final)' in reproduce.listing('toy')
  w = reporting.Writer(str(tmp_path))
  run = reporting.Run(path='sym0.2/seed0/fedavg', method='fedavg', setting='sym0.2', seed=0,
                      results={'final_accuracy': 0.6, 'last10_accuracy': 0.65,
                               'rounds': [{'round': 1, 'test_accuracy': 0.7}]})
  paper_table.render(w, {'sym0.2': {'fedavg': [run]}}, table.study('cpu'))
  text = '\n'.join(w.lines)
  assert 'ours in the metric this project reads it as (last round)' in text
  # A run of one evaluated round: its "last 10" is named by the window it covers.
  assert '| paper (unstated) | ours (final) | ours (last 1) | ours (best) |' in text
  assert '| Sym. 0.2 | fedavg (FedAvg) | 80.00 | 60.00 | 65.00 | 70.00 | 1 |' in text
  (tmp_path / 'toy.yaml').write_text(protocol.replace('metric_reading: final',
                                                      'metric_reading: first'))
  with pytest.raises(ConfigError, match='metric_reading'):
    reproduce.table_of('toy', None)


def test_every_shipped_protocol_loads_and_its_cells_validate(monkeypatch):
  """The protocols in experiments/protocols: numbers for the methods they name, settings
  that the config accepts, every cell of every scale a valid config (no data is built;
  the paper scale's datasets are not on this machine)."""
  monkeypatch.setattr(reproduce, '_check_dataset_present', lambda config: None)
  checked = {scale: 0 for scale in reproduce.SCALES}
  for paper in reproduce.papers():
    for table in reproduce.load(paper).values():
      for setting, row in table.paper_numbers.items():
        assert setting in table.settings and set(row) <= set(table.methods), table.id
      for scale in table.scales:
        plan = reproduce.plan(table, scale)
        checked[scale] += len(studies.plan_grid(
            plan.config_path, plan.overrides, plan.methods, plan.settings, plan.seeds,
            plan.method_overrides))
        runtimes = {r.config.fl.client_runtime for r in studies.plan_grid(
            plan.config_path, plan.overrides, plan.methods, plan.settings, plan.seeds[:1],
            plan.method_overrides)}
        # The committed cpu reports ran on tff, the reference runtime: their protocols pin
        # it so reruns and --resume reproduce them; the paper scale leaves it to auto
        # (tf, on the GPU a user brings).
        assert runtimes == ({'tff'} if scale == 'cpu' else {'auto'}), (table.id, scale)
  assert checked['cpu'] >= 36 and checked['paper'] >= 500, checked
  # Without --table: the first table with a protocol at the scale (FedLN's first table,
  # CIFAR-10, has only the paper's).
  assert reproduce.table_of('fedln', None, 'cpu').id == 'table1_fmnist'
  assert reproduce.table_of('fedln', None, 'paper').id == 'table1_cifar10'


def test_fedln_baselines_take_the_official_code_parameters():
  """docs/papers/fedln.md, ambiguity 13: LS smoothing 0.2, Bi-Tempered t1 0.8 and t2 1.4
  (not the project's defaults); the other methods keep the config's params."""
  plan = reproduce.plan(reproduce.table_of('fedln', 'table1_fmnist'), 'cpu')
  runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings[:1],
                           plan.seeds[:1], plan.method_overrides)
  params = {r.method: r.config.method.params for r in runs}
  assert params['label_smoothing'] == {'smoothing': 0.2}
  assert params['bi_tempered'] == {'t1': 0.8, 't2': 1.4}
  assert params['fedavg'] == {} and params['fedln_nafedavg']['nu'] == 75


def test_fedln_s_centralized_row_is_fedavg_on_one_client_holding_all_data_all_noisy(
    monkeypatch):
  """Table 1's "Centralized": one model trained on all the data with every label noisy,
  i.e. FedAvg with a single client that holds every example, is noisy and takes part in
  every round; the table's rounds, epochs and noise otherwise, as FedAvg's."""
  monkeypatch.setattr(reproduce, '_check_dataset_present', lambda config: None)
  for table_id, fmnist_cell in (('table1_fmnist', 63.87), ('table1_cifar10', 58.83)):
    table = reproduce.table_of('fedln', table_id)
    assert table.methods['centralized'] == 'Centralized'
    assert table.paper_numbers['nl0.7_ns0.0']['centralized'] == fmnist_cell
    for scale in table.scales:
      plan = reproduce.plan(table, scale, methods=['fedavg', 'centralized'])
      runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods,
                               plan.settings, plan.seeds[:1], plan.method_overrides)
      for setting in plan.settings:
        by_name = {r.name: r.config for r in runs if r.path.startswith(setting.name + "/")}
        central, fedavg = by_name['centralized'], by_name['fedavg']
        assert (central.method.name, central.method.params) == ('fedavg', {})
        assert (central.partition.num_clients, central.clients_per_round()) == (1, 1)
        assert central.noise.noisy_fraction == 1.0 and fedavg.noise.noisy_fraction == 0.8
        assert (central.noise.name, central.noise.level, central.fl.rounds,
                central.fl.local_epochs) == (fedavg.noise.name, fedavg.noise.level,
                                             fedavg.fl.rounds, fedavg.fl.local_epochs)


def test_maskedoptim_aggregates_as_its_paper_and_its_baselines_with_the_mean():
  plan = reproduce.plan(reproduce.table_of('maskedoptim', 'table3_cifar10'), 'cpu')
  runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings,
                           plan.seeds[:1], plan.method_overrides)
  assert {(r.name, r.config.fl.aggregator) for r in runs} == {
      ('fedavg', 'mean'), ('fedprox', 'mean'), ('coteaching', 'mean'), ('fednoro', 'mean'),
      ('fedexp', 'mean'), ('coteaching_plus', 'mean'), ('joint_optim', 'mean'),
      ('selfie', 'mean'), ('dividemix', 'mean'), ('rfl', 'mean'), ('fedlsr', 'mean'),
      ('fedrn', 'mean'), ('fedelc', 'mean'), ('feddiv', 'mean'), ('fedrg', 'mean'),
      ('trimmed_mean', 'trimmed_mean'), ('krum', 'krum'),
      ('coordinate_median', 'coordinate_median'),
      ('maskedoptim', 'geometric_median_per_tensor')}


def test_maskedoptim_s_robust_aggregator_rows_are_fedavg_with_kappa_0_3(monkeypatch):
  """Sec. 5.1: kappa = 0.3 for Krum and TrimmedMean, FNBench's int(0.3 n) of a round's n
  clients: TrimmedMean's beta 0.3 (floor(0.3 * 5) = 1 value trimmed per end at the cpu
  scale's 5 clients a round), Krum's f = floor(0.3 * 5) = 1 at the cpu scale and
  floor(0.3 * 10) = 3 at the paper's 10; Median without a parameter. Each runs fedavg (no
  method params) in its own directory, on FedAvg's data."""
  monkeypatch.setattr(reproduce, '_check_dataset_present', lambda config: None)
  table = reproduce.table_of('maskedoptim', 'table3_cifar10')
  rows = ('trimmed_mean', 'krum', 'coordinate_median')
  assert {row: table.methods[row] for row in rows} == {
      'trimmed_mean': 'TrimmedMean (Yin et al., 2018)',
      'krum': 'Krum (Blanchard et al., 2017)', 'coordinate_median': 'Median (Li et al., 2021b)'}
  expected = {'cpu': {'trimmed_mean': {'beta': 0.3}, 'krum': {'f': 1}, 'coordinate_median': {}},
              'paper': {'trimmed_mean': {'beta': 0.3}, 'krum': {'f': 3},
                        'coordinate_median': {}}}
  for scale, clients in (('cpu', 5), ('paper', 10)):
    plan = reproduce.plan(table, scale, methods=['fedavg', *rows])
    runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods,
                             plan.settings[:1], plan.seeds[:1], plan.method_overrides)
    by_name = {r.name: r for r in runs}
    assert {row: by_name[row].config.fl.aggregator_params for row in rows} == expected[scale]
    for row in rows:
      run = by_name[row]
      assert (run.method, run.row, run.config.method.name, run.config.method.params) == (
          'fedavg', row, 'fedavg', {})
      assert run.path.endswith('/' + row) and run.config.clients_per_round() == clients
      assert run.config.data_hash() == by_name['fedavg'].config.data_hash()


# The methods each shipped cpu scale ran for its committed report (docs/papers/reports;
# FedDS Table 5's FedAvg and FedDS cells are its Table 4 report's):
# mapping more of a paper's rows adds methods to a scale, never removes or renames these,
# so a --resume of those grids keeps every finished cell.
_CPU_METHODS = {
    ('fedds', 'table4_mnist'): ['fedavg', 'fedds', 'fedprox', 'fedds_fedprox'],
    ('fedds', 'table5_mnist'): ['fedavg', 'fedds'],
    ('fedefc', 'table2_mnist'): ['fedavg', 'fedprox', 'confident_learning',
                                 'forward_correction', 'fedefc'],
    ('fedln', 'table1_fmnist'): ['fedavg', 'label_smoothing', 'bi_tempered',
                                 'confident_learning', 'fedln_nnc', 'fedln_nafedavg'],
    ('lsc', 'table2_cifar10'): ['fedavg', 'sce', 'lsc'],
    ('maskedoptim', 'table3_cifar10'): ['fedavg', 'fedprox', 'maskedoptim'],
}
# The baselines' rows run at the cpu scale so far (their cells join the reports above).
_CPU_BASELINES = {('fedefc', 'table2_mnist'): ['fedcorr', 'ditto', 'feddyn'],
                  ('fedln', 'table1_fmnist'): ['centralized'],
                  ('fedds', 'table5_mnist'): ['focus'],
                  ('lsc', 'table2_cifar10'): ['logitclip', 'fednoro', 'fedcorr', 'fedln_akd'],
                  ('fedds', 'table4_mnist'): ['scaffold', 'fedds_scaffold', 'moon', 'fedds_moon'],
                  ('maskedoptim', 'table3_cifar10'): [
                      'coteaching', 'fednoro', 'fedexp', 'coteaching_plus', 'joint_optim',
                      'selfie', 'dividemix', 'rfl', 'fedlsr', 'fedrn', 'fedelc', 'feddiv', 'fedrg',
                      'trimmed_mean', 'krum', 'coordinate_median']}


def test_the_cpu_scales_run_the_methods_of_their_committed_reports_and_the_new_rows():
  scales = {(paper, table.id): table for paper in reproduce.papers()
            for table in reproduce.load(paper).values() if 'cpu' in table.scales}
  assert set(scales) == set(_CPU_METHODS)
  for key, table in scales.items():
    methods = table.scales['cpu'].methods
    assert sorted(methods) == sorted(_CPU_METHODS[key] + _CPU_BASELINES.get(key, [])), key
    assert set(methods) <= set(table.methods), key


def test_fedds_table5_cpu_cells_of_fedavg_and_fedds_are_table4s(monkeypatch):
  """Table 5's cpu scale runs Table 4's FedAvg and FedDS cells with the same configs, so
  a copy of Table 4's report resumes with only FOCUS's cells to run."""
  monkeypatch.setattr(reproduce, '_check_dataset_present', lambda config: None)

  def cells(table_id):
    plan = reproduce.plan(reproduce.table_of('fedds', table_id), 'cpu',
                          methods=['fedavg', 'fedds'])
    runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings,
                             plan.seeds, plan.method_overrides)
    return {r.path: r.config for r in runs}

  table4, table5 = cells('table4_mnist'), cells('table5_mnist')
  assert len(table5) == 18 and table5 == {path: table4[path] for path in table5}
  table = reproduce.table_of('fedds', 'table5_mnist')
  assert table.methods['focus'] == 'FOCUS [13]'
  assert table.paper_numbers['iid']['focus'] == 96.24


def test_feddiv_is_an_extra_row_without_a_paper_number_and_its_codes_warm_up():
  """FedDiv is not one of MaskedOptim's Table 3 rows: no paper number in any setting; its
  runs keep its released code's 5 warm-up iterations, not the config's T_w = 10."""
  table = reproduce.table_of('maskedoptim', 'table3_cifar10')
  assert 'feddiv' in table.methods and 'feddiv' in table.scales['cpu'].methods
  assert all('feddiv' not in row for row in table.paper_numbers.values())
  plan = reproduce.plan(table, 'cpu', methods=['fedavg', 'feddiv'])
  runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings,
                           plan.seeds[:1], plan.method_overrides)
  (feddiv,) = [r for r in runs if r.method == 'feddiv']
  assert feddiv.config.method.params['warmup_rounds'] == 5


def test_fedln_akd_is_mapped_with_the_papers_numbers_and_its_distillation_weight():
  """LSC's FedLN-AKD rows: the paper's label and numbers; at the cpu scale its runs take
  A.4's alpha_akd = 10 (not the scale's alpha = 0.5 for SymCE) and the config's encoder."""
  table = reproduce.table_of('lsc', 'table2_cifar10')
  assert table.methods['fedln_akd'] == 'FedLN-AKD (Tsouvalas et al., 2024)'
  assert (table.paper_numbers['rho0.7_tau0.2']['fedln_akd'],
          table.paper_numbers['rho1.0_tau0.5']['fedln_akd']) == (81.18, 50.58)
  assert reproduce.table_of('lsc', 'table9_cifar100').paper_numbers['rho1.0_tau0.5'][
      'fedln_akd'] == 9.99
  plan = reproduce.plan(table, 'cpu', methods=['fedavg', 'fedln_akd'])
  runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings,
                           plan.seeds[:1], plan.method_overrides)
  (akd,) = {r.config.method.name: r for r in runs if r.method == 'fedln_akd'}.values()
  params = akd.config.method.params
  assert (params['alpha'], params['encoder'], params['pca_components']) == (10.0, 'pca', 64)


def test_the_baselines_rows_carry_the_papers_numbers():
  """Spot checks of the rows mapped with the baselines (the first cell of each)."""
  lsc = reproduce.table_of('lsc', 'table2_cifar10')
  new = ('logitclip', 'fednoro', 'fedcorr')
  assert {m: lsc.methods[m] for m in new} == {
      'logitclip': 'LogitClip (Wei et al., 2023)', 'fednoro': 'FedNoro (Wu et al., 2023)',
      'fedcorr': 'FedCorr (Xu et al., 2022)'}
  assert {m: lsc.paper_numbers['rho0.7_tau0.2'][m] for m in new} == {
      'logitclip': 73.12, 'fednoro': 79.84, 'fedcorr': 80.43}
  assert {m: reproduce.table_of('fedds', 'table4_mnist').paper_numbers['iid'][m]
          for m in ('scaffold', 'fedds_scaffold', 'moon', 'fedds_moon')} == {
              'scaffold': 92.70, 'fedds_scaffold': 95.78, 'moon': 95.28, 'fedds_moon': 96.51}
  assert reproduce.table_of('fedds', 'table4_cifar100').paper_numbers['dir10']['fedds_moon'] == 34.06
  assert reproduce.table_of('fedefc', 'table2_mnist').paper_numbers['a100_p0.8']['fedcorr'] == 96.47
  mo = reproduce.table_of('maskedoptim', 'table3_cifar10').paper_numbers['sym_0.0-0.4']
  assert (mo['coteaching'], mo['fednoro']) == (66.42, 70.81)
  assert (mo['fedexp'], mo['selfie'], mo['fedelc']) == (63.00, 64.49, 71.21)  # @Rec.
  assert mo['fedrn'] == 46.56  # @Rec; FedRN's warm-up is 20% of each scale's rounds.
  table3 = reproduce.table_of('maskedoptim', 'table3_cifar10')
  assert table3.methods['fedrn'] == 'FedRN (Kim et al., 2022)'
  assert {scale: table3.method_overrides_at(scale, ['fedrn'])['fedrn'] for scale in
          ('cpu', 'paper')} == {
              'cpu': ['fl.aggregator=mean', 'method.params.warmup_rounds=20'],
              'paper': ['fl.aggregator=mean', 'method.params.warmup_rounds=24']}
  fedefc3 = reproduce.table_of('fedefc', 'table3_cifar100').paper_numbers['rho0.1_zeta0.0']
  assert (fedefc3['ditto'], fedefc3['feddyn']) == (61.95, 64.20)
  table6 = reproduce.table_of('maskedoptim', 'table6_clothing1m')
  assert table6.paper_numbers['clothing1m'] == {
      'fedavg': 69.26, 'fedprox': 67.62, 'coteaching': 69.77, 'fedcorr': 69.92,
      'fednoro': 70.62, 'maskedoptim': 71.89, 'trimmed_mean': 68.57, 'krum': 67.32,
      'coordinate_median': 69.00, 'fedexp': 69.53, 'coteaching_plus': 68.02,
      'joint_optim': 70.31, 'selfie': 69.97, 'dividemix': 70.08, 'elr': 68.66, 'rfl': 71.77,
      'fedlsr': 69.78, 'fedrn': 68.60, 'fedelc': 71.64}
  assert table6.methods['elr'] == 'ELR (Liu et al., 2020)'
  # Tables 4-5's new rows; Table 4 prints '-' for DivideMix, FedLSR and FedRN: no number.
  agnews = reproduce.table_of('maskedoptim', 'table4_agnews')
  assert {m: agnews.paper_numbers['sym_0.0-0.8'][m] for m in (
      'fedexp', 'coteaching_plus', 'joint_optim', 'selfie', 'dividemix', 'rfl', 'fedlsr',
      'fedrn', 'fedelc')} == {
          'fedexp': 56.07, 'coteaching_plus': 55.20, 'joint_optim': 31.85, 'selfie': 16.13,
          'dividemix': None, 'rfl': 28.07, 'fedlsr': None, 'fedrn': None, 'fedelc': 57.29}
  assert agnews.methods['joint_optim'] == 'JointOptim (Tanaka et al., 2018)'
  cifar10n = reproduce.table_of('maskedoptim', 'table5_cifar10n').paper_numbers
  assert (cifar10n['iid']['fedexp'], cifar10n['dir1.0']['fedrn'],
          cifar10n['dir0.5']['fedelc']) == (87.31, 70.87, 81.25)  # @Rec.
  # FedRN's warm-up: 20% of each table's rounds (60, 120, 40).
  assert [reproduce.table_of('maskedoptim', t).method_overrides['fedrn'] for t in (
      'table4_agnews', 'table5_cifar10n', 'table6_clothing1m')] == [
          ['fl.aggregator=mean', f'method.params.warmup_rounds={w}'] for w in (12, 24, 8)]
  # The robust aggregators' rows (@Rec in Tables 3 and 5, F1 in Table 4).
  rows = ('trimmed_mean', 'krum', 'coordinate_median')
  assert [mo[r] for r in rows] == [60.95, 36.27, 63.67]
  assert [reproduce.table_of('maskedoptim', 'table3_cifar10').paper_numbers['mixed_0.0-0.4'][r]
          for r in rows] == [59.72, 28.39, 65.82]
  assert [reproduce.table_of('maskedoptim', 'table4_agnews').paper_numbers['pair_0.0-0.4'][r]
          for r in rows] == [54.21, 44.37, 61.06]
  assert [reproduce.table_of('maskedoptim', 'table5_cifar10n').paper_numbers['dir0.5'][r]
          for r in rows] == [65.72, 36.84, 71.82]


def test_lsc_baselines_take_the_appendix_parameters(monkeypatch):
  """LSC A.4: LogitClip tau 1.0, FedNoRo warm-up 50, FedCorr T_1/T_2/T_3 = 5/500/450 in
  1000 effective rounds (fl.rounds 955: one round per pre-processing iteration); PathMNIST's
  5/125/125 through its table's own method_set."""
  monkeypatch.setattr(reproduce, '_check_dataset_present', lambda config: None)
  plan = reproduce.plan(reproduce.table_of('lsc', 'table2_cifar10'), 'paper')
  runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings[:1],
                           plan.seeds[:1], plan.method_overrides)
  configs = {r.method: r.config for r in runs}
  assert configs['logitclip'].method.params == {'tau': 1.0}
  assert configs['fednoro'].method.params == {'warmup_rounds': 50, 'temperature': 0.8}
  assert configs['fedcorr'].method.params == {'beta': 5.0, 't1': 5, 't2': 500, 't3': 450}
  assert configs['sce'].method.params == {'alpha': 0.5, 'beta': 0.5}
  assert (configs['fedcorr'].fl.rounds, configs['sce'].fl.rounds) == (955, 1000)
  assert reproduce.table_of('lsc', 'table2_pathmnist').method_overrides['fedcorr'] == [
      'method.params.beta=5.0', 'method.params.t1=5', 'method.params.t2=125',
      'method.params.t3=125', 'fl.rounds=255']
  assert reproduce.table_of('lsc', 'table2_mura').method_overrides['fedcorr'] == [
      'method.params.beta=5.0']


def test_lsc_cpu_scale_rescales_fedcorr_s_stages_to_its_150_rounds():
  """The cpu scale's own method_set wins over the table's paper-scale stages: 5 x 4 + 68 +
  62 = 150 effective rounds at 5 of 20 clients a round."""
  plan = reproduce.plan(reproduce.table_of('lsc', 'table2_cifar10'), 'cpu')
  runs = studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings[:1],
                           plan.seeds[:1], plan.method_overrides)
  configs = {r.method: r.config for r in runs}
  assert configs['fedcorr'].method.params == {'beta': 5.0, 't1': 5, 't2': 68, 't3': 62}
  assert (configs['fedcorr'].fl.rounds, configs['fednoro'].fl.rounds) == (135, 150)
  assert configs['fednoro'].method.params == {'warmup_rounds': 50, 'temperature': 0.8}
  assert configs['fedavg'].method.params == {}


def _toy_with(tmp_path, monkeypatch, after: str, line: str) -> str:
  """The toy protocol with ``line`` after the line ``after``, installed; its text."""
  protocol = textwrap.dedent(_PROTOCOL).replace(after + '\n', after + '\n' + line + '\n')
  (tmp_path / 'toy.yaml').write_text(protocol)
  monkeypatch.setattr(reproduce, 'PROTOCOL_DIR', str(tmp_path))
  return protocol


def test_a_table_s_own_method_set_comes_after_the_protocol_s(tmp_path, monkeypatch):
  protocol = _toy_with(
      tmp_path, monkeypatch, '    methods: {fedavg: "FedAvg", fedprox: "FedProx"}',
      '    method_set: {fedprox: ["method.params.mu=0.1"], fedavg: ["fl.rounds=2"]}')
  assert reproduce.table_of('toy', 'table2').method_overrides == {
      'fedprox': ['fl.aggregator=coordinate_median', 'method.params.mu=0.1'],
      'fedavg': ['fl.rounds=2']}
  (tmp_path / 'toy.yaml').write_text(protocol.replace('fedavg: ["fl.rounds=2"]',
                                                      'sce: ["fl.rounds=2"]'))
  with pytest.raises(ConfigError, match=r"table table2: method_set names 'sce', not one of "
                     r"the table's methods: fedavg, fedprox"):
    reproduce.load('toy')


def test_a_scale_s_own_method_set_comes_last_and_only_at_that_scale(tmp_path, monkeypatch):
  protocol = _toy_with(tmp_path, monkeypatch, '      minutes_per_cell: 0.5',
                       '      method_set: {fedprox: ["fl.aggregator=mean"]}')
  table = reproduce.table_of('toy', 'table2')
  assert table.method_overrides_at('cpu') == {'fedprox': ['fl.aggregator=mean']}
  assert table.method_overrides_at('paper') == {
      'fedprox': ['fl.aggregator=coordinate_median']}
  (tmp_path / 'toy.yaml').write_text(protocol.replace('method_set: {fedprox: ["fl.aggregator',
                                                      'method_set: {sce: ["fl.aggregator'))
  with pytest.raises(ConfigError, match=r"table table2 \(scale cpu\): method_set names 'sce'"):
    reproduce.load('toy')


def test_only_the_chosen_settings_and_methods_run_in_the_protocol_s_order(toy):
  plan = reproduce.plan(toy, 'cpu', settings=['sym0.6'], methods=['fedprox', 'fedavg'])
  assert [s.name for s in plan.settings] == ['sym0.6']
  assert plan.methods == ['fedavg', 'fedprox']
  assert reproduce.plan(toy, 'cpu', methods=['fedavg']).method_overrides == {}
  assert toy.study('cpu', methods=['fedavg'])['method_overrides'] == {}  # Nor the report.
  with pytest.raises(ConfigError, match=r"^--settings: table 'table2' at scale cpu has no "
                     r"'sym0\.66'; did you mean 'sym0\.6'\? Allowed: sym0\.2, sym0\.6$"):
    reproduce.plan(toy, 'cpu', settings=['sym0.66'])
  with pytest.raises(ConfigError, match=r"^--methods: name at least one of fedavg, fedprox"):
    reproduce.plan(toy, 'cpu', methods=[])


# A row that is not a method's name: FedAvg with the trimmed mean (floor(0.25 * 5) = 1
# value trimmed per end with the demo config's 5 clients a round).
_ROWS = ('rows: {tm: {method: fedavg, set: ["fl.aggregator=trimmed_mean", '
         '"fl.aggregator_params.beta=0.25"]}}')


def _toy_with_row(tmp_path, monkeypatch, rows: str = _ROWS, after: str = '',
                  line: str = '') -> None:
  """The toy protocol with ``rows`` and the row ``tm`` in its table (a paper number at
  Sym. 0.2), and ``line`` after the line ``after``; installed."""
  protocol = textwrap.dedent(_PROTOCOL).replace('tables:\n', rows + '\ntables:\n', 1)
  protocol = protocol.replace('methods: {fedavg: "FedAvg", fedprox: "FedProx"}',
                              'methods: {fedavg: "FedAvg", fedprox: "FedProx", '
                              'tm: "TrimmedMean"}')
  protocol = protocol.replace('fedprox: 82.5}', 'fedprox: 82.5, tm: 78.0}')
  if after:
    protocol = protocol.replace(after + '\n', after + '\n' + line + '\n')
  (tmp_path / 'toy.yaml').write_text(protocol)
  monkeypatch.setattr(reproduce, 'PROTOCOL_DIR', str(tmp_path))


def test_a_row_runs_its_method_with_its_own_overrides_in_its_own_directory(tmp_path,
                                                                          monkeypatch):
  _toy_with_row(tmp_path, monkeypatch)
  table = reproduce.table_of('toy', 'table2')
  assert table.rows == {'tm': 'fedavg'} and table.paper_numbers['sym0.2']['tm'] == 78.0
  assert table.method_overrides['tm'] == [
      'method.name=fedavg', 'fl.aggregator=trimmed_mean', 'fl.aggregator_params.beta=0.25']
  assert '      --methods fedavg,fedprox,tm; rows: tm (fedavg)' in reproduce.listing('toy')
  plan = reproduce.plan(table, 'cpu', methods=['tm', 'fedavg'])
  assert plan.methods == ['fedavg', 'tm']
  runs = {r.path: r for r in studies.plan_grid(
      plan.config_path, plan.overrides, plan.methods, plan.settings, plan.seeds,
      plan.method_overrides)}
  assert len(runs) == 8  # 2 settings x 2 seeds x 2 rows.
  row, base = runs['sym0.2/seed1/tm'], runs['sym0.2/seed1/fedavg']
  assert (row.method, row.row, row.name, row.config.method.name) == (
      'fedavg', 'tm', 'tm', 'fedavg')
  assert (row.config.fl.aggregator, row.config.fl.aggregator_params) == (
      'trimmed_mean', {'beta': 0.25})
  assert (base.row, base.name, base.config.fl.aggregator) == (None, 'fedavg', 'mean')
  assert row.config.data_hash() == base.config.data_hash()  # The same data as FedAvg's.
  assert table.study('cpu', methods=['tm'])['rows'] == {'tm': 'fedavg'}
  assert table.study('cpu', methods=['fedavg'])['rows'] == {}
  with pytest.raises(ConfigError, match=r"^--methods: table 'table2' at scale cpu has no "
                     r"'TM'; did you mean 'tm'\? Allowed: fedavg, fedprox, tm$"):
    reproduce.plan(table, 'cpu', methods=['TM'])


@pytest.mark.parametrize('rows, message', [
    ('rows: {TM: {method: fedavg}}', r"^protocol toy, table table2: methods names 'tm', "
     r"neither a method nor one of the protocol's rows; did you mean 'TM'\? Rows: TM$"),
    ('rows: {tm: {method: fedavgg}}', r"^protocol toy: rows\.tm\.method: unknown method "
     r"'fedavgg'; did you mean 'fedavg'\?"),
    ('rows: {tm: {set: []}}', r'^protocol toy: rows\.tm\.method: missing'),
    ('rows: {tm: {method: fedavg, sets: []}}', r"^protocol toy: rows\.tm: unknown key "
     r"'sets'; did you mean 'set'\? Allowed: method, set$"),
    ('rows: {tm: {method: fedavg, set: fl.aggregator=krum}}',
     r'^protocol toy: rows\.tm\.set: expected a list of key=value overrides$'),
    ('rows: {tm: {method: fedavg, set: [method.name=fedprox]}}',
     r"^protocol toy: rows\.tm\.set: sets method\.name; the row's method is "
     r"protocol toy: rows\.tm\.method$"),
    ('rows: {fedprox: {method: fedavg}}', r"^protocol toy: rows\.fedprox: 'fedprox' is a "
     r"method's name; a row needs a name of its own"),
    ('rows: {"../tm": {method: fedavg}}', r"^protocol toy: rows: row id '\.\./tm': "),
    ('rows: [tm]', r'^protocol toy: rows: expected a mapping of row id'),
])
def test_a_wrong_row_is_one_error_naming_its_field(tmp_path, monkeypatch, rows, message):
  _toy_with_row(tmp_path, monkeypatch, rows)
  with pytest.raises(ConfigError, match=message) as error:
    reproduce.load('toy')
  assert '\n' not in str(error.value)


def test_a_method_set_keeps_its_method_and_a_scale_runs_the_table_s_rows(tmp_path,
                                                                         monkeypatch):
  _toy_with_row(tmp_path, monkeypatch, after='    methods: {fedavg: "FedAvg", fedprox: '
                '"FedProx", tm: "TrimmedMean"}',
                line='    method_set: {fedprox: ["method.name=fedavg"]}')
  with pytest.raises(ConfigError, match=r"^protocol toy, table table2: method_set\.fedprox "
                     r"sets method\.name; a method run under overrides of its own is a row"):
    reproduce.load('toy')
  _toy_with_row(tmp_path, monkeypatch, after='      minutes_per_cell: 0.5',
                line='      methods: [fedavg, sce]')
  with pytest.raises(ConfigError, match=r"^protocol toy, table table2 \(scale cpu\): methods "
                     r"names 'sce', not one of the table's: fedavg, fedprox, tm$"):
    reproduce.load('toy')
  # A scale's method_set adds to a row's overrides, at that scale only.
  _toy_with_row(tmp_path, monkeypatch, after='      minutes_per_cell: 0.5',
                line='      method_set: {tm: ["fl.aggregator_params.beta=0.4"]}')
  table = reproduce.table_of('toy', 'table2')
  assert table.method_overrides_at('cpu')['tm'] == [
      'method.name=fedavg', 'fl.aggregator=trimmed_mean', 'fl.aggregator_params.beta=0.4']
  assert table.method_overrides_at('paper')['tm'][-1] == 'fl.aggregator_params.beta=0.25'
  # A grid's method keeps its name: its overrides may not make it another method.
  plan = reproduce.plan(table, 'cpu', methods=['fedavg'])
  with pytest.raises(ConfigError, match=r"^fedavg: its overrides set method\.name=fedprox"):
    studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings,
                      plan.seeds, {'fedavg': ['method.name=fedprox']})


def test_the_report_shows_a_row_under_its_label_never_as_its_method(tmp_path, monkeypatch):
  """The row's runs are fedavg runs (results.json says so); the manifest names them by
  the row, and the report sets them beside the paper's row, apart from FedAvg's."""
  _toy_with_row(tmp_path, monkeypatch)
  table = reproduce.table_of('toy', 'table2')
  plan = reproduce.plan(table, 'cpu', methods=['fedavg', 'tm'])

  def run(config, out, choices):
    del choices
    trimmed = config.fl.aggregator == 'trimmed_mean'  # The row: 5 points above FedAvg.
    best = 0.70 + (0.05 if trimmed else 0.0) + 0.01 * config.seed
    results = results_lib.Results(
        config=config.to_dict(), data_hash=config.data_hash(), method=config.method.name,
        params={}, rounds=[{'round': 1, 'test_accuracy': best},
                           {'round': 2, 'test_accuracy': best - 0.1}],
        client_noise_rates={})
    results_lib.write(out, results)
    return results

  out = tmp_path / 'out'
  out.mkdir()
  studies.grid(plan.config_path, plan.overrides, plan.methods, plan.settings, plan.seeds,
               str(out), run, paper=table.study('cpu', methods=plan.methods),
               method_overrides=plan.method_overrides)
  manifest = studies.read_manifest(str(out))
  assert manifest['methods'] == ['fedavg', 'tm']
  assert manifest['runs'][:2] == [
      {'path': 'sym0.2/seed0/fedavg', 'method': 'fedavg', 'setting': 'sym0.2', 'seed': 0},
      {'path': 'sym0.2/seed0/tm', 'method': 'fedavg', 'setting': 'sym0.2', 'seed': 0,
       'row': 'tm'}]
  assert results_lib.load(str(out / 'sym0.2/seed0/tm'))['method'] == 'fedavg'
  text = open(report.write_report(str(out))[0]).read()
  assert ('`tm` is `fedavg` with `fl.aggregator=trimmed_mean fl.aggregator_params.beta=0.25`'
          ' (the protocol\'s `rows`') in text
  # Best round over seeds 0 and 1: FedAvg 0.70, 0.71; the row 0.75, 0.76 (2 seeds each).
  assert '| Sym. 0.2 | fedavg (FedAvg) | 80.00 | 70.50 ± 0.50 | 65.50 ± 0.50 | 2 |' in text
  assert '| Sym. 0.2 | tm (TrimmedMean) | 78.00 | 75.50 ± 0.50 | 70.50 ± 0.50 | 2 |' in text
  assert '| Sym. 0.2 | tm | -2.00 | +5.00 | 0.00 | 0: +5.00, 1: +5.00 | 2 of 2 |' in text
  grid_csv = (out / 'grid.csv').read_text()
  assert 'Sym. 0.2' not in grid_csv and ',tm,2,' in grid_csv  # The grid's own table too.
  # A row's run not started yet is named by its row.
  os.rename(out / 'sym0.6' / 'seed1' / 'tm', tmp_path / 'not_yet')
  text = open(report.write_report(str(out))[0]).read()
  assert '| sym0.6 | tm | 1 | not started |' in text


def test_a_row_runs_for_real_and_resumes(tmp_path, tmp_cache, monkeypatch, capfd):
  """``reproduce`` of a row on digits, 2 rounds, tf runtime: the run is FedAvg with the
  row's aggregator (its results.json config; its rounds' trimmed_per_end = floor(0.25 *
  5) = 1), reported under the row's label; ``--resume`` keeps both cells."""
  from experiments import run as cli  # pylint: disable=g-import-not-at-top
  _toy_with_row(tmp_path, monkeypatch)
  out = str(tmp_path / 'out')
  command = ['reproduce', 'toy', '--settings', 'sym0.2', '--methods', 'fedavg,tm',
             '--seeds', '0', '--set', 'fl.rounds=2', '--set', 'fl.client_runtime=tf',
             '--out', out]
  cli.main(command)
  row = results_lib.load(os.path.join(out, 'sym0.2', 'seed0', 'tm'))
  base = results_lib.load(os.path.join(out, 'sym0.2', 'seed0', 'fedavg'))
  assert row['method'] == 'fedavg' and row['config']['method']['name'] == 'fedavg'
  assert (row['config']['fl']['aggregator'], row['config']['fl']['aggregator_params']) == (
      'trimmed_mean', {'beta': 0.25})
  assert [r['aggregator']['trimmed_per_end'] for r in row['rounds']] == [1, 1]
  assert base['config']['fl']['aggregator'] == 'mean' and row['data_hash'] == base['data_hash']
  curve = lambda results: [r['test_accuracy'] for r in results['rounds']]
  assert curve(row) != curve(base)  # Another server rule on the same data.
  assert studies.read_manifest(out)['runs'][1]['row'] == 'tm'
  text = open(os.path.join(out, 'report.md')).read()
  assert '| Sym. 0.2 | tm (TrimmedMean) | 78.00 | ' in text
  capfd.readouterr()
  cli.main(command + ['--resume'])
  assert '[grid] 2 of 2 cells finished earlier with the same config: kept; 0 to run' in (
      capfd.readouterr().err)

@pytest.mark.slow
def test_the_paper_scale_runs_a_round_on_a_tfds_cifar10_directory(tmp_path, tmp_cache):
  """FedDS's Table 4 CIFAR-10 columns at the paper's scale (VGG-9, 100 clients, 10 per
  round, E=5, B=64), one round, on a small fake TFDS directory: the route a user with
  the prepared dataset takes, down to the report beside the paper's numbers."""
  from experiments import run as cli  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  data_dir = helpers.fake_tfds_cifar10(str(tmp_path / 'tfds'), train=1200, test=100)
  out = str(tmp_path / 'out')
  cli.main(['reproduce', 'fedds', '--table', 'table4_cifar10', '--scale', 'paper',
            '--settings', 'iid', '--methods', 'fedds', '--seeds', '0',
            '--set', 'fl.rounds=1', '--set', f'data.data_dir={data_dir}', '--out', out])
  manifest = studies.read_manifest(out)
  assert manifest['methods'] == ['fedds'] and list(manifest['settings']) == ['iid']
  for run in manifest['runs']:
    results = results_lib.load(os.path.join(out, run['path']))
    config = results['config']
    assert (config['data']['dataset'], config['model']['name'],
            config['partition']['num_clients'], config['fl']['participation'],
            config['fl']['local_epochs'], config['fl']['batch_size']) == (
                'cifar10', 'vgg9', 100, 0.1, 5, 64)
    assert [len(r['clients']) for r in results['rounds']] == [10]
  text = open(os.path.join(out, 'report.md')).read()
  assert '## Beside the paper: fedds Table 4 (CIFAR-10 columns)' in text
  assert '| IID | fedds (FedAvg [33] / + FedDS) | ' in text
  assert 'Every cell ran with `--set fl.rounds=1 --set data.data_dir=' in text


_REPORTS = os.path.join(os.path.dirname(__file__), '..', 'docs', 'papers', 'reports')


def test_the_committed_cells_are_kept_by_a_resume_of_their_table():
  """A committed report holds each finished cell's results.json (``report --publish``).
  Each one ran the config its protocol plans today, method defaults included: a copy of
  the report continues with ``reproduce --resume`` and keeps it. A changed protocol or
  default fails here, until the cells are run again."""
  kept = {}
  for directory in sorted(glob.glob(os.path.join(_REPORTS, '*', studies.MANIFEST_FILE))):
    directory = os.path.dirname(directory)
    name = os.path.relpath(directory, _REPORTS)
    paper = studies.read_manifest(directory)['paper']
    table = reproduce.table_of(paper['paper'], paper['table'], paper['scale'])
    plan = reproduce.plan(table, paper['scale'], extra=paper['extra_overrides'])
    for r in studies.plan_grid(plan.config_path, plan.overrides, plan.methods,
                               plan.settings, plan.seeds, plan.method_overrides):
      if os.path.exists(os.path.join(directory, r.path, results_lib.RESULTS_FILE)):
        assert studies.finished_results(os.path.join(directory, r.path), r.config), (
            f'{name}/{r.path} ran another config than its protocol plans today')
        kept[name] = kept.get(name, 0) + 1
  # The grids published with every cell (the earlier reports have none); the encoder
  # study's grids are the table's lsc or fedln_nnc row under
  # ``--set method.params.encoder=...`` (FedLN's at its three cpu settings).
  assert kept == {'fedds_table4_mnist_cpu': 72,
                  'fedds_table5_mnist_cpu': 27,
                  'fedefc_table2_mnist_cpu': 24,
                  'fedln_table1_fmnist_cpu': 63,
                  'fedln_table1_fmnist_cpu_control_encoder': 9,
                  'fedln_table1_fmnist_cpu_efficientnet_lite0': 9,
                  'lsc_table2_cifar10_cpu': 42,
                  'lsc_table2_cifar10_cpu_control_encoder': 6,
                  'lsc_table2_cifar10_cpu_efficientnet_lite0': 6}, kept


def test_methods_leave_out_the_scale_params_only_the_others_take():
  """LSC's cpu scale sets SymCE's alpha and beta for every cell; ``--methods`` without
  SymCE drops alpha (no chosen method takes it), not beta (FedCorr's, pinned by its
  method_set), and each planned cell is the whole grid's cell (so --resume keeps it)."""
  table = reproduce.table_of('lsc', 'table2_cifar10', 'cpu')
  whole = reproduce.plan(table, 'cpu', seeds=[0])
  some = reproduce.plan(table, 'cpu', seeds=[0], methods=['fedavg', 'fedcorr'])
  assert [o for o in whole.overrides if o not in some.overrides] == ['method.params.alpha=0.5']
  cells = lambda plan: {r.path: r.config for r in studies.plan_grid(
      plan.config_path, plan.overrides, plan.methods, plan.settings, plan.seeds,
      plan.method_overrides)}
  chosen, every = cells(some), cells(whole)
  assert len(chosen) == 4 and all(chosen[path] == every[path] for path in chosen)
  assert {c.method.params.get('beta') for c in chosen.values()} == {None, 5.0}
  # A --set of a parameter no chosen method takes is still an error.
  plan = reproduce.plan(table, 'cpu', seeds=[0], methods=['fedavg'],
                        extra=['method.params.tau=2.0'])
  with pytest.raises(ConfigError, match='method.params.tau: neither'):
    studies.plan_grid(plan.config_path, plan.overrides, plan.methods, plan.settings,
                      plan.seeds, plan.method_overrides)
