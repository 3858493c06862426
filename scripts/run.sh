#!/usr/bin/env bash
# Set up (idempotent) and run the app on embedded defaults: SQLite, in-memory channel layer,
# Celery eager, the bundled model on the CPU. http://127.0.0.1:8000
# Safe on a LAN: DEBUG off (no debug pages), a secret key made once in var/secret_key (mode 0600), static files
# served by WhiteNoise, the demo accounts' password made at setup and printed once. DEBUG=1 for development.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-0}" HF_HUB_OFFLINE=1
export SECRET_KEY_FILE="${SECRET_KEY_FILE:-var/secret_key}"
# Plain http: cookies are not Secure-only and there is no redirect to https. To serve the LAN, set HOST=0.0.0.0
# and add this machine's name or address to ALLOWED_HOSTS.
export HTTPS="${HTTPS:-0}" ALLOWED_HOSTS="${ALLOWED_HOSTS:-127.0.0.1,localhost,[::1]}"
bash scripts/setup.sh
.venv/bin/python manage.py load_demo_store
.venv/bin/python manage.py collectstatic --noinput -v 0
# Convert the bundled GGUF once, before the server starts, so the first chat doesn't wait for it.
.venv/bin/python -m inference.worker.loader --prepare
echo "Serving on http://${HOST:-127.0.0.1}:${PORT:-8000} (Ctrl-C to stop)"
exec .venv/bin/python -m shop_assistant.serve
