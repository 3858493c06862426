"""The web process's threads are started by ``shop_assistant.startup`` (which ``serve`` calls), never as a side
effect of importing the ASGI application or its routing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

PROBE = """
import json, os, threading
import django
django.setup()
import shop_assistant.asgi  # the application daphne serves, with its websocket routing
imported = sorted(t.name for t in threading.enumerate())
from shop_assistant.startup import start_web_process
start_web_process()
started = sorted(t.name for t in threading.enumerate())
print(json.dumps({"imported": imported, "started": started}), flush=True)
os._exit(0)  # not waiting for the model to load
"""


def _threads(tmp_path, **env: str) -> dict[str, list[str]]:
    environment = {
        **os.environ, "DJANGO_SETTINGS_MODULE": "shop_assistant.settings", "DEBUG": "1", "HF_HUB_OFFLINE": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "SHOP_ASSISTANT_VAR_DIR": str(tmp_path), **env,
    }
    environment.pop("REDIS_URL", None)
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=environment, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_application_starts_nothing_and_startup_starts_each_thread(tmp_path):
    threads = _threads(tmp_path, ENGINE_AUTOSTART="1", NODE_LISTENER="1")
    assert threads["imported"] == ["MainThread"]
    assert {"engine-loader", "engine-node-listener", "chat-spool-replayer"} <= set(threads["started"])


def test_without_the_engine_only_the_spool_replayer_starts(tmp_path):
    threads = _threads(tmp_path, ENGINE_AUTOSTART="0", NODE_LISTENER="1")
    assert set(threads["started"]) - set(threads["imported"]) == {"chat-spool-replayer"}
