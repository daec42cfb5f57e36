#!/usr/bin/env bash
# Create or refresh .venv from requirements.lock; a no-op when the lock and setup.cfg are unchanged.
# Usage: scripts/install_venv.sh [VENV_DIR]   (PYTHON=... picks the interpreter; default python3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
python=${PYTHON:-}
if [ -z "$python" ]; then
  for candidate in python3.11 python3.10 python3.9 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then python=$candidate; break; fi
  done
fi
if [ -z "$python" ] || ! command -v "$python" >/dev/null 2>&1; then
  echo "tff-noisy: no Python interpreter found. Supported versions: 3.9, 3.10, 3.11 (3.11 recommended); set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case "$version" in
  3.9|3.10|3.11) ;;
  *) echo "tff-noisy: $python is Python $version; tensorflow-federated 0.87 and TensorFlow 2.14 support Python 3.9, 3.10 and 3.11 only. Install one of those (3.11 recommended) and set PYTHON=/path/to/python3.11." >&2
     exit 1 ;;
esac
key=$(cat requirements.lock setup.cfg | sha256sum | cut -c1-16)-py$version
stamp="$venv/.tff-noisy-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi
echo "tff-noisy: creating $venv with $python (Python $version) from requirements.lock ..."
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade "pip<25" "setuptools<70" wheel
"$venv/bin/python" -m pip install --quiet --no-deps -r requirements.lock
"$venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation -e .
echo "$key" > "$stamp"
echo "tff-noisy: $venv is ready."
