"""Bad input ends in one `tff-noisy: error:` line (exit 2), Ctrl-C in one line (exit 130)."""
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from experiments import run as cli
from tff_noisy import config as config_lib
from tff_noisy import methods
from tff_noisy import simulation
from tff_noisy.simulation import results as results_lib
from tff_noisy.simulation import run_dir
from tff_noisy.simulation import studies

_DEMO = os.path.join(os.path.dirname(__file__), '..', 'experiments', 'configs', 'demo.yaml')


def _fails(capsys, argv, status=2) -> str:
  """Runs the CLI; returns its one error line, without the prefix."""
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv)
  assert exit_info.value.code == status
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and err.startswith('tff-noisy: error: '), err
  assert 'Traceback' not in err
  return err[len('tff-noisy: error: '):].strip()


@pytest.mark.parametrize('text, value', [
    ('1e-3', 1e-3), ('5e-4', 5e-4), ('1E6', 1e6), ('+1e3', 1e3), ('1.5e-2', 0.015),
    ('0.05', 0.05), ('2', 2.0),
])
def test_numbers_in_exponent_form_are_numbers(tmp_path, text, value):
  config = config_lib.load(_DEMO, [f'fl.client_lr={text}'])
  assert config.fl.client_lr == value and isinstance(config.fl.client_lr, float)
  path = tmp_path / 'c.yaml'
  path.write_text(f'fl:\n  client_lr: {text}\n  rounds: 1e2\ndata:\n  train_subset: 1E3\n')
  config = config_lib.load(str(path))
  assert config.fl.client_lr == value
  assert (config.fl.rounds, config.data.train_subset) == (100, 1000)
  assert isinstance(config.fl.rounds, int)


@pytest.mark.parametrize('text, value', [
    ('017', 17), ('-017', -17), ('0x1f', 31), ('0b101', 5), ('1_000', 1000), ('08', 8),
])
def test_integers_are_read_as_yaml_1_2_not_1_1_octal(text, value):
  assert config_lib.apply_overrides({}, [f'x={text}']) == {'x': value}


def test_a_seed_with_a_leading_zero_is_that_decimal_seed(tmp_path):
  assert config_lib.load(_DEMO, ['seed=017']).seed == 17
  path = tmp_path / 'c.yaml'
  path.write_text('seed: 017\nfl:\n  rounds: 010\n')
  assert (config_lib.load(str(path)).seed, config_lib.load(str(path)).fl.rounds) == (17, 10)


def test_a_base_60_number_is_a_string_the_field_refuses(capsys, tmp_path):
  assert config_lib.apply_overrides({}, ['x=1:00', 'y=1:30.5']) == {'x': '1:00', 'y': '1:30.5'}
  assert _fails(capsys, ['run', _DEMO, '--set', 'seed=1:00', '--out', str(tmp_path)]) == (
      "seed: expected an integer, got '1:00'")


@pytest.mark.parametrize('override, message', [
    ('fl.client_lr=abc', "fl.client_lr: expected a number, got 'abc'"),
    ('fl.client_lr=1e-3x', "fl.client_lr: expected a number, got '1e-3x'"),
    ('fl.rounds=2.5', 'fl.rounds: expected an integer, got 2.5'),
    ('fl.rounds=1e-3', 'fl.rounds: expected an integer, got 0.001'),
    ('seed=-1', 'seed: must be an integer in [0, 2**32 - 1], got -1'),
    ('fl.rounds=1000000000', 'fl.rounds: must be in [1, 100,000] (the papers run up to '
     "1,000; every round stays in the run's history and checkpoints), got 1,000,000,000"),
    ('fl.x=[1,', "--set fl.x=[1,: invalid YAML: while parsing a flow node: expected the "
                 "node content, but found '<stream end>' (line 1, column 4)"),
])
def test_bad_values_say_what_they_got(capsys, tmp_path, override, message):
  assert _fails(capsys, ['run', _DEMO, '--set', override, '--out', str(tmp_path)]) == message


def _alias_bomb(levels: int) -> str:
  """A config whose fl.rounds is 9**levels strings through 9 aliases a level (before the
  limit, its error's repr of the value ran out of memory)."""
  nested = ['&x0 [a, a, a, a, a, a, a, a, a]']
  nested += [f'&x{i} [{", ".join([f"*x{i - 1}"] * 9)}]' for i in range(1, levels + 1)]
  return f'fl:\n  rounds: [{", ".join(nested)}]\n'


def test_an_alias_bomb_is_refused_before_it_expands(capsys, tmp_path):
  path = tmp_path / 'bomb.yaml'
  path.write_text(_alias_bomb(9))  # 9**9 strings from 600 characters.
  assert len(path.read_text()) < 1000
  assert _fails(capsys, ['run', str(path), '--out', str(tmp_path / 'o')]) == (
      f'config file {path}: more than 100,000 values once its aliases (*name) are expanded, '
      'the most a config may hold; write the values out or use fewer aliases')
  path.write_text(_alias_bomb(2))  # 81 values: aliases as people use them still load.
  assert _fails(capsys, ['run', str(path), '--out', str(tmp_path / 'o')]).startswith(
      "fl.rounds: expected an integer, got [['a', ")


def test_an_alias_inside_its_own_anchor_is_refused(capsys, tmp_path):
  path = tmp_path / 'loop.yaml'
  path.write_text('noise:\n  rates: &r [0.1, *r]\n')
  assert _fails(capsys, ['run', str(path), '--out', str(tmp_path / 'o')]) == (
      f'config file {path}: an alias refers to the collection that holds it (line 2); '
      'write the values out')


def test_a_huge_config_or_value_is_refused_in_a_short_line(capsys, tmp_path):
  path = tmp_path / 'big.yaml'
  path.write_text('data:\n  dataset: ' + 'x' * (2 << 20) + '\n')
  assert _fails(capsys, ['run', str(path), '--out', str(tmp_path / 'o')]) == (
      f'config file {path}: more than 1,048,576 characters, the most a config may hold')
  path.write_text('data:\n  dataset: ' + 'x' * 500_000 + '\n')
  message = _fails(capsys, ['run', str(path), '--out', str(tmp_path / 'o')])
  assert message.startswith("data.dataset: unknown dataset 'xxxx") and len(message) < 1000
  assert '(500,000 characters)' in message
  message = _fails(capsys, ['run', _DEMO, '--set', 'fl.rounds=' + 'x' * 100_000, '--out',
                            str(tmp_path / 'o')])
  assert message.startswith("fl.rounds: expected an integer, got 'xxx") and len(message) < 200


def test_yaml_syntax_error_is_one_line_with_line_and_column(capsys, tmp_path):
  path = tmp_path / 'bad.yaml'
  path.write_text('fl:\n  rounds: 3\n  client_lr 0.1\n')
  message = _fails(capsys, ['data', 'build', str(path)])
  assert message.startswith(f'config file {path}: invalid YAML: ')
  assert '(line 4, column 1)' in message


def test_an_out_that_is_not_utf_8_is_one_line(capsys):
  out = os.fsdecode(b'/tmp/bad\xff\xfedir')
  assert _fails(capsys, ['run', _DEMO, '--out', out]) == (
      "--out: '/tmp/bad\\xff\\xfedir' is not UTF-8; give a directory whose name is")
  assert not os.path.exists(out)


def test_config_path_that_is_a_directory(capsys, tmp_path):
  assert _fails(capsys, ['run', str(tmp_path), '--out', str(tmp_path / 'o')]) == (
      f'config file {tmp_path} is a directory; give a YAML file')


def test_grid_seeds_that_are_not_integers(capsys, tmp_path):
  assert _fails(capsys, ['grid', _DEMO, '--methods', 'fedavg', '--seeds', '0,x', '--out',
                         str(tmp_path)]) == (
      "--seeds: expected comma-separated integers, e.g. 0,1,2; got '0,x'")


def test_grid_jobs_below_one_and_jobs_with_workers(capsys, tmp_path):
  grid = ['grid', _DEMO, '--methods', 'fedavg', '--out', str(tmp_path / 'g')]
  assert _fails(capsys, grid + ['--jobs', '0']) == '--jobs: expected an integer >= 1, got 0'
  assert _fails(capsys, grid + ['--jobs', '2', '--workers', 'localhost:7000']) == (
      '--jobs: runs at once would share the --workers; give one of --jobs and --workers')
  assert not (tmp_path / 'g').exists()  # Refused before any work.


@pytest.mark.parametrize('command', ['compare', 'grid'])
def test_compared_methods_share_one_params_section(capsys, tmp_path, command):
  """Each compared method keeps the parameters it takes; one no method takes is an error."""
  sets = ['--set', 'fl.rounds=12', '--set', 'method.params.activation_round=4',
          '--set', 'method.params.warmup_rounds=6']
  config = config_lib.load(_DEMO, sets[1::2])
  assert config.method.name == 'fedln_nafedavg'
  configs = studies.method_configs(config, ['fedavg', 'fedln', 'maskedoptim'])
  assert configs['fedavg'][0].method.params == {}
  assert configs['fedln'][0].method.params == {'activation_round': 4}
  assert configs['maskedoptim'][0].method.params == {'warmup_rounds': 6}
  assert configs['fedln'][1].method_params.activation_round == 4  # Validated, resolved.
  # The config's own method takes R_c: comparing FedAvg with FedProx on it is fine.
  assert set(studies.method_configs(config_lib.load(_DEMO), ['fedavg', 'fedprox'])) == {
      'fedavg', 'fedprox'}
  message = _fails(capsys, [command, _DEMO, '--methods', 'fedavg,fedprox', *sets,
                            '--out', str(tmp_path)])
  assert message == ("method.params.warmup_rounds: neither the config's method "
                     '(fedln_nafedavg) nor a compared one (fedavg, fedprox) takes it (it '
                     'belongs to selfie, dividemix, fedrn, joint_optim, maskedoptim, fednoro, '
                     'fedelc, feddiv, fedrg)')
  assert not os.listdir(tmp_path)  # Refused before any run started.


def test_out_that_is_a_file_or_holds_another_run(capsys, tmp_path):
  (tmp_path / 'f').write_text('x')
  assert _fails(capsys, ['run', _DEMO, '--out', str(tmp_path / 'f')]) == (
      f'--out: {tmp_path / "f"} is a file, not a directory')
  (tmp_path / 'old').mkdir()
  (tmp_path / 'old' / 'results.json').write_text('{}')
  for command in (['run', _DEMO], ['compare', _DEMO, '--methods', 'fedavg']):
    message = _fails(capsys, command + ['--out', str(tmp_path / 'old')])
    assert message.startswith(f'--out: {tmp_path / "old"} is not empty (results.json)')
    assert '--resume' in message and '--overwrite' in message


def test_resume_and_overwrite_exclude_each_other(capsys, tmp_path):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', _DEMO, '--out', str(tmp_path), '--resume', '--overwrite'])
  assert exit_info.value.code == 2
  assert 'not allowed with argument --resume' in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_releases_the_output_directory(capsys, tmp_path, monkeypatch):

  def interrupted(config, out_dir, resume, workers, choices):
    assert (tmp_path / run_dir.LOCK_FILE).exists()
    raise KeyboardInterrupt

  fake_driver = types.SimpleNamespace(run_experiment=interrupted)
  monkeypatch.setitem(sys.modules, 'tff_noisy.simulation.driver', fake_driver)
  monkeypatch.setattr(simulation, 'driver', fake_driver, raising=False)
  assert _fails(capsys, ['run', _DEMO, '--out', str(tmp_path)], status=130) == (
      'interrupted; continue with --resume')
  assert not (tmp_path / run_dir.LOCK_FILE).exists()


def test_export_of_truncated_weights(capsys, tmp_path):
  config = config_lib.load(_DEMO)
  results_lib.write(str(tmp_path), results_lib.Results(
      config=config.to_dict(), data_hash=config.data_hash(), method='fedavg', params={},
      rounds=[], client_noise_rates={}))
  (tmp_path / results_lib.WEIGHTS_FILE).write_bytes(b'PK\x03\x04 truncated')
  message = _fails(capsys, ['export', str(tmp_path)])
  assert message.startswith(f'{tmp_path / results_lib.WEIGHTS_FILE} cannot be read (')
  assert '--resume' in message


_MAIN = """
import sys
from experiments import run
try:
  run.main(sys.argv[1:])
except SystemExit as e:
  print('exit', e.code, 'tensorflow' in sys.modules)
"""


def test_export_quantize_is_checked_before_importing_tensorflow(tmp_path):
  done = subprocess.run([sys.executable, '-c', _MAIN, 'export', str(tmp_path), '--quantize',
                         'int4'], capture_output=True, text=True, timeout=120)
  assert done.stdout.split() == ['exit', '2', 'False']
  assert done.stderr == ("tff-noisy: error: unknown quantize 'int4'; allowed: none, float16, "
                         'dynamic, int8\n')


@pytest.mark.parametrize('method', ['{name: maskedoptim, params: {warmup_rounds: 5}}',
                                    '{name: lsc}'])
def test_a_method_that_cannot_train_on_devices_fails_before_tensorflow(tmp_path, method):
  config = tmp_path / 'config.yaml'
  config.write_text(f'data: {{dataset: digits, cache_dir: {tmp_path / "cache"}}}\n'
                    f'method: {method}\nfl: {{rounds: 10}}\n')
  done = subprocess.run([sys.executable, '-c', _MAIN, 'run', str(config), '--set',
                         'fl.client_runtime=tflite', '--out', str(tmp_path / 'out')],
                        capture_output=True, text=True, timeout=120)
  assert done.stdout.split() == ['exit', '2', 'False']
  assert sorted(os.listdir(tmp_path)) == ['config.yaml']  # No data, no run directory.
  name = config_lib.load(str(config)).method.name
  assert done.stderr == (
      f"tff-noisy: error: fl.client_runtime: tflite, but method '{name}' cannot train on "
      f'devices: {methods.METHODS[name].off_device}; {methods.device_support()}\n')


def test_evaluate_names_a_cut_off_results_file_and_weights_of_another_model(
    capsys, tmp_path, monkeypatch):
  monkeypatch.setenv('TFF_NOISY_CACHE', str(tmp_path / 'cache'))
  run = tmp_path / 'run'
  run.mkdir()
  text = json.dumps({'config': config_lib.load(_DEMO).to_dict(), 'rounds': []})
  (run / 'results.json').write_text(text[:len(text) // 2])
  np.savez(run / 'final_weights.npz', np.ones((3, 3)), np.ones(3))
  message = _fails(capsys, ['evaluate', str(run)])
  assert message.startswith(f'{run / "results.json"} cannot be read (')
  assert message.endswith(f'not a whole results file; write it again with `tff-noisy run '
                          f'CONFIG --out {run} --resume`')
  (run / 'results.json').write_text(text)
  assert _fails(capsys, ['evaluate', str(run)]) == (
      f"{run / 'final_weights.npz'} holds 2 arrays that do not fit the run's model (mlp: 4 "
      f'weight arrays); it belongs to another run: write it again with `tff-noisy run CONFIG '
      f'--out {run} --resume`')


def test_an_empty_config_file_loads_the_defaults_and_says_so(capsys, tmp_path):
  path = tmp_path / 'empty.yaml'
  path.write_text('# nothing set yet\n')
  assert config_lib.load(str(path)) == config_lib.ExperimentConfig()
  assert capsys.readouterr().err == (
      f'tff-noisy: warning: config file {path} sets nothing: every field takes its default '
      '(digits, no noise, fedavg, 10 rounds; `tff-noisy list config` shows them all)\n')


_PROGRAM = """
import atexit, sys
marker = sys.argv[1]
atexit.register(lambda: open(marker, 'w').write('exit handlers ran'))
from experiments import run
sys.argv = ['tff-noisy'] + sys.argv[2:]
run.cli()
print('not reached')
"""


@pytest.mark.parametrize('argv, status', [(['list', 'noise'], 0),
                                          (['run', 'missing.yaml', '--out', 'x'], 2),
                                          (['--help'], 0)])
def test_the_program_ends_with_the_command_s_status_after_its_exit_handlers(
    tmp_path, argv, status):
  marker = tmp_path / 'marker'
  done = subprocess.run([sys.executable, '-c', _PROGRAM, str(marker), *argv],
                        capture_output=True, text=True, timeout=120, cwd=tmp_path)
  assert done.returncode == status, done.stderr
  assert marker.read_text() == 'exit handlers ran'
  assert 'not reached' not in done.stdout and 'Traceback' not in done.stderr
  if status:
    assert done.stderr == 'tff-noisy: error: config file not found: missing.yaml\n'
  else:
    assert done.stdout.strip()
