"""tools.message_path on the bundled model: one real message, every thread profiled, the files it crossed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.slow]


def test_one_message_crosses_the_protocol_the_answer_service_the_engine_and_the_log(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "MESSAGE_PATH_DATABASE_URL")}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    out = tmp_path / "path.json"
    result = subprocess.run(
        [sys.executable, "-m", "tools.message_path", "--json", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    files = set(report["files"])
    assert report["count"] == len(files) and f"files: {len(files)}" in result.stdout
    # The consumer's thread, the planning worker, the engine's thread and the writer: each is seen.
    assert {
        "shop_assistant/chat/protocol/consumers.py",
        "shop_assistant/chat/protocol/frames.py",
        "shop_assistant/chat/answers/service.py",
        "catalog/search.py",
        "inference/engine.py",
        "inference/worker/model_runner.py",
        "shop_assistant/chat/log/writes.py",
    } <= files
    # Only project files, and nothing a message has no business in.
    assert all(name.startswith(("shop_assistant/", "catalog/", "inference/")) for name in files)
    assert not any(name.startswith(("shop_assistant/console/views", "shop_assistant/chat/migrations")) for name in files)
