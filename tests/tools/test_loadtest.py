"""The load test's durability mode against one real daphne on the Redis layer with a real Celery worker:
every session finishes and every message and answer is in the database.

LOADTEST_SESSIONS (default 200) and LOADTEST_MESSAGES (default 1) size it; the report (sessions dropped,
messages lost, first-token p50/p99, daphne's peak memory, /metrics) is written to LOADTEST_REPORT if set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

from .conftest import run_daphne, run_worker, subprocess_env

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.heavy, pytest.mark.backend_agnostic]


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise AssertionError("no VmHWM")


def test_concurrent_sessions_lose_nothing(demo_store, redis_url, tmp_path):
    import redis

    # A Redis database of its own: other test runs on this machine share db 15, and their workers would take
    # (and write elsewhere) this run's log tasks.
    redis_url = redis_url.rsplit("/", 1)[0] + "/" + os.environ.get("LOADTEST_REDIS_DB", "12")
    redis.Redis.from_url(redis_url).flushdb()
    sessions = int(os.environ.get("LOADTEST_SESSIONS", "200"))
    messages = int(os.environ.get("LOADTEST_MESSAGES", "1"))
    env = {
        "REDIS_URL": redis_url,
        "CHAT_MAX_TOKENS": "16",
        "CHAT_CONNECTIONS_PER_IP": "0",
        "CHAT_MESSAGES_PER_MINUTE_PER_IP": "0",
        "ENGINE_MAX_NUM_SEQS": "32",
        "METRICS_TOKEN": "load-test",
        "CHAT_SPOOL_DIR": str(tmp_path / "spool"),
    }
    with run_worker(tmp_path, redis_url), run_daphne(tmp_path, **env) as server:
        result = subprocess.run(
            [sys.executable, "-m", "tools.loadtest", "--check-db", "--json",
             "--url", f"{server.ws}?store=demo", "--sessions", str(sessions), "--messages", str(messages),
             "--timeout", "1200", "--drain", "120"],
            cwd=REPO_ROOT, env=subprocess_env(ENGINE_AUTOSTART="0", REDIS_URL=redis_url),
            capture_output=True, text=True, timeout=1500,
        )
        peak = _peak_rss_mib(server.process.pid)
        request = urllib.request.Request(f"{server.http}/metrics", headers={"Authorization": "Bearer load-test"})
        with urllib.request.urlopen(request, timeout=30) as response:
            metrics_text = response.read().decode()
    assert result.stdout, result.stderr[-4000:]
    report = json.loads(result.stdout)
    report["daphne_peak_rss_mib"] = peak
    summary = {k: v for k, v in report.items() if k != "sessions_detail"}
    if os.environ.get("LOADTEST_REPORT"):
        Path(os.environ["LOADTEST_REPORT"]).write_text(json.dumps(summary, indent=2) + "\n\n" + metrics_text)
    print(json.dumps(summary, indent=2))
    assert report["sessions_dropped"] == 0, summary
    assert report["messages_lost"] == 0, summary
    assert report["answers_ended"] == sessions * messages
    assert "vllm:time_to_first_token_seconds_count" in metrics_text
