#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
# On a shared 2-core machine spinning OpenMP threads slow every engine step many times over.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# Tests run the engine in several processes at once (pytest, daphne, workers): one thread each.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
bash scripts/setup.sh
# The widget test drives Debian's Chromium (Playwright never downloads a browser here).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing Debian's chromium for the widget test ..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing: install Debian's 'chromium' package for the widget test." >&2
  fi
fi
# The multi-node test puts Debian's nginx in front of two daphne nodes (deploy/nginx.conf).
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing Debian's nginx for the multi-node test ..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  else
    echo "nginx is missing: install Debian's 'nginx' package for the multi-node test." >&2
  fi
fi
exec .venv/bin/python -m pytest "$@"
