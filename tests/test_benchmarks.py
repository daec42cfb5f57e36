"""The benchmarks stop with one clear line when their Python cannot run them, and run."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

_BENCHMARKS = os.path.join(os.path.dirname(__file__), '..', 'benchmarks')
_GPU = os.path.join(_BENCHMARKS, 'gpu.py')


def _load(path):
  spec = importlib.util.spec_from_file_location('benchmark_under_test', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_gpu_benchmark_names_the_missing_package_before_any_work(monkeypatch):
  gpu = _load(_GPU)
  monkeypatch.setattr(gpu, 'NEEDS', ('tensorflow', 'no_such_package_for_this_test'))
  monkeypatch.setattr(sys, 'argv', ['gpu.py'])
  monkeypatch.setattr(gpu.subprocess, 'run', lambda *a, **k: pytest.fail('work started'))
  with pytest.raises(SystemExit) as exit_info:
    gpu.main()
  message = str(exit_info.value.code)
  assert message.startswith('benchmarks/gpu.py: error: ')
  assert 'no_such_package_for_this_test' in message and 'tensorflow,' not in message
  assert '.venv/bin/python' in message


@pytest.mark.slow
def test_gpu_benchmark_runs_a_tiny_round_on_the_tf_runtime():
  """The path a GPU machine takes, on the CPU (tf-cpu runs the same code as tf-gpu)."""
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='-1')
  done = subprocess.run([sys.executable, _GPU, '--one', 'tf-cpu', '--clients', '2',
                         '--examples', '4', '--epochs', '1', '--batch-size', '4'],
                        env=env, capture_output=True, text=True, timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  row = json.loads(done.stdout.strip().splitlines()[-1])
  assert row['variant'] == 'tf-cpu' and row['round_s'] > 0
  assert row['runtime']['client_runtime'] == 'tf'


def _tiny_config(tmp_path):
  path = tmp_path / 'tiny.yaml'
  path.write_text(json.dumps({  # JSON is YAML.
      'seed': 0, 'data': {'dataset': 'digits', 'cache_dir': str(tmp_path / 'cache')},
      'partition': {'num_clients': 4}, 'noise': {'name': 'symmetric', 'rate': 0.2},
      'model': {'name': 'mlp', 'width': 16},
      'fl': {'rounds': 40, 'clients_per_round': 2, 'batch_size': 32}}))
  return str(path)


def _run_main(monkeypatch, tmp_path, name, *args):
  """Benchmark ``name``'s ``main`` on ``args``, writing its results under ``tmp_path``."""
  monkeypatch.syspath_prepend(_BENCHMARKS)  # stacking.py imports method_cost.
  module = _load(os.path.join(_BENCHMARKS, f'{name}.py'))
  monkeypatch.setattr(module, 'RESULTS', str(tmp_path / 'results'))
  monkeypatch.setattr(sys, 'argv', [f'{name}.py', *args])
  module.main()
  (written,) = (tmp_path / 'results').iterdir()
  return json.loads(written.read_text())


@pytest.mark.slow
def test_stacking_benchmark_runs_a_tiny_point(monkeypatch, tmp_path):
  results = _run_main(monkeypatch, tmp_path, 'stacking', _tiny_config(tmp_path),
                      '--points', '16x32x1', '--rounds', '1')
  (point,) = results['points']
  assert point['stacked_s_per_round'] > 0 and point['one_call_per_client_s_per_round'] > 0
  assert point['default_on_cpu_stacks'] is True  # An MLP of few steps stacks on the CPU.


@pytest.mark.slow
def test_method_cost_benchmark_runs_both_phases_on_both_runtimes(monkeypatch, tmp_path):
  results = _run_main(monkeypatch, tmp_path, 'method_cost', _tiny_config(tmp_path),
                      '--methods', 'fedavg,fedefc', '--rounds', '1', '--runtimes', 'tff,tf')
  assert sorted(results['methods']) == [
      'fedavg [tf]', 'fedavg [tff]', 'fedefc [tf] (corrected=0)', 'fedefc [tf] (corrected=1)',
      'fedefc [tff] (corrected=0)', 'fedefc [tff] (corrected=1)']
  assert all(row['median_s_per_round'] > 0 for row in results['methods'].values())


def _run_script(tmp_path, name, *args) -> dict:
  """Benchmark ``name`` run as a command (it runs its measurements in child processes),
  writing its JSON under ``tmp_path``."""
  out = tmp_path / f'{name}.json'
  done = subprocess.run([sys.executable, os.path.join(_BENCHMARKS, f'{name}.py'), *args,
                         '--out', str(out)], capture_output=True, text=True, timeout=900,
                        check=False, cwd=os.path.join(_BENCHMARKS, '..'))
  assert done.returncode == 0, done.stderr[-2000:]
  return json.loads(out.read_text())


@pytest.mark.slow
def test_scale_benchmark_measures_the_tf_runtime_against_its_ceiling(tmp_path):
  results = _run_script(tmp_path, 'scale', '--runtime', 'tf', '--clients', '30',
                        '--rounds', '3', '--examples', '10', '--batch-size', '5')
  (row,), (ceiling,) = results['sizes'], results['ceilings']
  assert ceiling['clients'] == 30 and ceiling['clients_per_call'] == (
      row['runtime_record']['clients_per_call'])
  # Two steps of 2*B*(2*d*h + 3*h*C) FLOPs: B=5, d=64, h=128, C=10.
  assert ceiling['flops_per_update'] == 2 * 2 * 5 * (2 * 64 * 128 + 3 * 128 * 10)
  assert ceiling['products_updates_per_s'] > 0 and ceiling['hand_step_updates_per_s'] > 0
  assert row['fraction_of_hand_step'] == pytest.approx(
      row['clients_per_s'] / ceiling['hand_step_updates_per_s'])


@pytest.mark.slow
def test_soak_benchmark_samples_memory_every_round_on_both_runtimes(tmp_path):
  results = _run_script(tmp_path, 'soak', '--runtime', 'tf,tff', '--clients', '8',
                        '--rounds', '4,3', '--settle', '2')
  tf_run, tff_run = results['runs']
  assert (tf_run['runtime'], len(tf_run['driver_rss_bytes'])) == ('tf', 4)
  assert (tff_run['runtime'], len(tff_run['worker_rss_bytes'])) == ('tff', 3)
  assert tff_run['worker_rss_bytes'][0] > 0 and tf_run['settle_round'] == 2
  total = [d + w for d, w in zip(tf_run['driver_rss_bytes'], tf_run['worker_rss_bytes'])]
  assert tf_run['growth_after_settle'] == pytest.approx((total[-1] - total[1]) / total[1])


@pytest.mark.slow
def test_dataset_leak_benchmark_measures_every_stage_of_the_client_pipeline(tmp_path):
  results = _run_script(tmp_path, 'dataset_leak', '--datasets', '50', '--warmup', '5')
  stages = {row['stage']: row for row in results['stages']}
  assert set(stages) == {'from_tensor_slices', 'range', 'range_batch', 'range_shuffle',
                         'client_dataset', 'range_shuffle_new_int_seeds',
                         'client_dataset_new_seeds'}
  for row in stages.values():
    assert (row['datasets'], row['warmup']) == (50, 5)
    assert row['rss_bytes_per_dataset'] == pytest.approx(row['rss_growth_bytes'] / 50)
    assert row['python_traced_bytes_per_dataset'] >= 0  # From its own, traced process.
  assert results['tensorflow'].startswith('2.')


@pytest.mark.slow
def test_remote_benchmark_runs_its_workers_through_tff_noisy_worker_with_tls(monkeypatch,
                                                                            tmp_path):
  """Its workers are `tff-noisy worker --certs` on loopback (mutual TLS), never a bare
  worker_binary on an open port; none is left running, and the remote run equals the
  local one."""
  remote = _load(os.path.join(_BENCHMARKS, 'remote.py'))
  results = tmp_path / 'results' / 'remote.json'
  monkeypatch.setattr(remote, 'RESULTS', str(results))
  started = []
  real_start = remote._start_worker  # pylint: disable=protected-access

  def start(port, certs):
    started.append(real_start(port, certs))
    return started[-1]

  monkeypatch.setattr(remote, '_start_worker', start)
  monkeypatch.setattr(sys, 'argv', ['remote.py', _tiny_config(tmp_path), '--rounds', '2',
                                    '--workers-count', '2'])
  remote.main()
  report = json.loads(results.read_text())
  assert report['workers'] == 2 and report['workers_started_as'] == remote.ROUTE
  assert report['remote']['median_round_s'] > 0 and report['ratio_median_round'] > 0
  assert report['max_final_weight_difference'] < 1e-5
  assert len(started) == 2
  for command in started:
    worker = command.args[command.args.index('worker'):]
    assert worker[:2] == ['worker', '--port'] and worker[3:6] == ['--host', '127.0.0.1',
                                                                   '--certs']
    assert command.returncode == 0  # Stopped by SIGTERM, its binary with it.
  assert 'TFF_NOISY_WORKER_CERTS' not in os.environ
