"""``docs/python-api.md`` runs as written: its examples, top to bottom, as one script."""
import os
import re
import subprocess
import sys

import pytest

_PAGE = os.path.join(os.path.dirname(__file__), '..', 'docs', 'python-api.md')


@pytest.mark.slow
def test_the_python_api_page_runs_as_written(tmp_path):
  with open(_PAGE) as f:
    code = '\n'.join(re.findall(r'```python\n(.*?)```', f.read(), re.S))
  assert all(f'tff_noisy.{name}(' in code for name in ('build', 'compare', 'export'))
  script = tmp_path / 'page.py'
  script.write_text(code)
  env = dict(os.environ, TFF_NOISY_CACHE=str(tmp_path / 'cache'), TF_CPP_MIN_LOG_LEVEL='2')
  done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=1800, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  out = done.stdout
  accuracy = float(re.search(r'FedEFC test accuracy ([0-9.]+)', out).group(1))
  assert accuracy > 0.5  # Digits with half the clients' labels flipped: well above chance.
  assert re.search(r'fedavg: final 0\.\d+, last 10 rounds 0\.\d+', out)
  assert 'noise.rate: must be in [0, 1], got 1.4' in out
  assert re.search(r"flagged as noisy \[.*\] scored against the truth: \{'flagged'", out)
  assert out.count('Factory ') == 7  # Each aggregator inside build_weighted_fed_avg.
  assert 'my_mlp' in out
  assert re.search(r'maskedoptim.tflite: [0-9,]+ bytes, top-1 agreement with Keras [01]\.\d+',
                   out)
  assert (tmp_path / 'maskedoptim.json').exists()
