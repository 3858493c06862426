#!/usr/bin/env bash
# Set up (idempotent) and run the app on embedded defaults: SQLite, in-memory channel layer,
# Celery eager, the bundled model on the CPU. http://127.0.0.1:8000
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-1}" HF_HUB_OFFLINE=1
bash scripts/setup.sh
.venv/bin/python manage.py load_demo_store
# Convert the bundled GGUF once, before the server starts, so the first chat doesn't wait for it.
.venv/bin/python -m inference.worker.loader --prepare
echo "Serving on http://127.0.0.1:8000 (Ctrl-C to stop)"
exec .venv/bin/daphne -b "${HOST:-127.0.0.1}" -p "${PORT:-8000}" \
    --websocket-max-message-size 4194304 --websocket_connect_timeout 30 shop_assistant.asgi:application
