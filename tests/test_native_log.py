"""TensorFlow's routine C++ lines stay off stderr where the calls that print them run
(Grappler in TFF's compiler, the TFLite converter and interpreter); every other line on
fd 2 still shows, and ``--verbose`` shows them all."""
import os
import re
import subprocess
import sys

import pytest

from tff_noisy import native_log

_ROOT = os.path.join(os.path.dirname(__file__), '..')
_GRAPPLER = ('2026-12-02 03:28:14.546505: E tensorflow/core/grappler/grappler_item_builder.'
             'cc:435] Failed to detect the fetch node(s), skipping this input\n')
_SESSION = ('2026-12-02 03:28:14.504782: I tensorflow/core/grappler/clusters/single_machine.'
            'cc:361] Starting new session\n')
_QUANTIZE = ('fully_quantize: 0, inference_type: 6, input_inference_type: FLOAT32, '
             'output_inference_type: FLOAT32\n')
_XNNPACK = 'INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n'
_REAL = ('2026-12-02 03:28:14.5: E tensorflow/core/framework/op_kernel.cc:1] OP_REQUIRES '
         'failed\n')
# What a subprocess's stderr must not hold.
_ROUTINE = re.compile(r'grappler|fully_quantize|XNNPACK|TfLiteFlexDelegate|select TF ops|'
                      r'AtomicFunction|Exception ignored')


def test_quiet_drops_only_the_routine_lines_of_fd_2(capfd):
  with native_log.quiet():
    for line in (_GRAPPLER, _SESSION, _REAL, _QUANTIZE, _XNNPACK):
      os.write(2, line.encode())
    with native_log.quiet():  # Nested: the same capture.
      os.write(2, b'a line of its own\n')
  os.write(2, _XNNPACK.encode())  # After the block: shown as printed.
  assert capfd.readouterr().err == _REAL + 'a line of its own\n' + _XNNPACK


def test_quiet_passes_the_lines_of_a_failing_call_and_the_error(capfd):
  @native_log.quietly
  def convert():
    os.write(2, (_QUANTIZE + 'error: failed to legalize operation\n').encode())
    raise ValueError('the converter failed')

  with pytest.raises(ValueError, match='the converter failed'):
    convert()
  assert capfd.readouterr().err == 'error: failed to legalize operation\n'


def test_verbose_shows_every_line(capfd, monkeypatch):
  monkeypatch.setattr(native_log, 'SHOW_ALL', True)
  with native_log.quiet():
    os.write(2, (_GRAPPLER + _XNNPACK).encode())
  assert capfd.readouterr().err == _GRAPPLER + _XNNPACK


def test_the_routine_pattern_matches_whole_lines_only():
  for line in (_GRAPPLER, _SESSION, _QUANTIZE, _XNNPACK):
    assert native_log.ROUTINE.fullmatch(line), line
  for line in (_REAL, _XNNPACK.replace('.\n', '. and then\n'), 'fully_quantize failed\n'):
    assert not native_log.ROUTINE.fullmatch(line), line


_API = """
import tff_noisy
results = tff_noisy.run({'data': {'dataset': 'digits'},
                         'fl': {'rounds': 2, 'client_runtime': 'tff'}}, out=%r)
tff_noisy.export(results, %r, quantize='int8', verify=True)
print('accuracy', results.final_accuracy)
"""


@pytest.mark.slow
def test_the_python_api_and_export_print_no_routine_lines(tmp_path):
  """A fresh interpreter at TensorFlow's default log level: TF's own start-up lines may
  show (the user's TF_CPP_MIN_LOG_LEVEL rules them), Grappler's and TFLite's do not; nor
  does anything at the interpreter's exit. Then the command line's export of that run."""
  out = str(tmp_path / 'run')
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  env['TFF_NOISY_CACHE'] = str(tmp_path / 'cache')
  done = subprocess.run([sys.executable, '-c', _API % (out, str(tmp_path / 'api.tflite'))],
                        cwd=_ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'accuracy 0.' in done.stdout
  assert not _ROUTINE.search(done.stderr), done.stderr
  for extra in ([], ['--quantize', 'int8']):
    exported = subprocess.run(
        [sys.executable, '-m', 'experiments.run', 'export', out, '--verify', *extra],
        cwd=_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert exported.returncode == 0, exported.stderr
    assert exported.stderr == '', exported.stderr
    assert 'top-1 agreement with Keras' in exported.stdout
