"""TensorFlow's routine C++ log lines, kept off stderr where the calls that print them run.

TensorFlow 2.14 reads its C++ log level (``TF_CPP_MIN_LOG_LEVEL``) once, when it first
logs, and some lines ignore it: the TFLite converter's ``fully_quantize: ...``, the TFLite
interpreter's ``INFO: Created TensorFlow Lite XNNPACK delegate for CPU.``. So a Python API
user sees Grappler's notes of every TFF computation TFF optimises, and the command line
(which sets the level to 3) the converter's and the interpreter's. :func:`quiet` runs a
call with file descriptor 2 sent to a private temporary file, then writes back every line
of it except the routine ones of ``ROUTINE`` (a real error passes, only later); nothing
is dropped once :data:`SHOW_ALL` is set (the command line's ``--verbose``).

The standard library only.
"""

import contextlib
import functools
import os
import re
import sys
import tempfile
import threading

# Lines TensorFlow prints on every call of the kind, errors in none of them: Grappler's
# cluster set-up and a graph without fetch nodes (TFF optimises those unchanged), the
# converter's ignored options and quantisation summary, the interpreter's delegates.
ROUTINE = re.compile('(?:' + '|'.join([
    r'.*grappler/devices\.cc:\d+\] Number of eligible GPUs \(core count >= \d+, '
    r'compute capability >= [\d.]+\): \d+',
    r'.*grappler/clusters/single_machine\.cc:\d+\] Starting new session',
    r'.*grappler_item_builder\.cc:\d+\] Failed to detect the fetch node\(s\), skipping '
    r'this input',
    r'.*tf_tfl_flatbuffer_helpers\.cc:\d+\] Ignored (output_format|drop_control_dependency)\.',
    r'fully_quantize: \d+, inference_type: \d+, input_inference_type: \w+, '
    r'output_inference_type: \w+',
    r'INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.',
    r'INFO: Created TensorFlow Lite delegate for select TF ops\.',
    r'INFO: TfLiteFlexDelegate delegate: \d+ nodes delegated out of \d+ nodes with \d+ '
    r'partitions\.',
]) + r')\s*')
SHOW_ALL = False
_LOCK = threading.Lock()
_ACTIVE = []  # [True] while a quiet block holds fd 2.


@contextlib.contextmanager
def quiet():
  """Runs the ``with`` block with ``ROUTINE`` lines of fd 2 left out. Process-wide (fd 2
  is): a ``quiet`` entered while one is active, in any thread, adds nothing. fd 2 is
  restored whatever ends the block (an exception, a signal's)."""
  saved = capture = None
  try:
    with _LOCK:
      if not SHOW_ALL and not _ACTIVE:
        _ACTIVE.append(True)
        sys.stderr.flush()
        capture = tempfile.TemporaryFile()  # Never a pipe: a full one would block the call.
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
    yield
  finally:
    if saved is not None:
      with _LOCK:
        try:
          sys.stderr.flush()
          os.dup2(saved, 2)
          capture.seek(0)
          for line in capture:
            if not ROUTINE.fullmatch(line.decode('utf-8', 'replace')):
              os.write(2, line)
        finally:
          os.close(saved)
          capture.close()
          _ACTIVE.clear()


def quietly(function):
  """``function`` run inside :func:`quiet`."""
  @functools.wraps(function)
  def wrapper(*args, **kwargs):
    with quiet():
      return function(*args, **kwargs)
  return wrapper
