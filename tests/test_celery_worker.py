"""A real Celery worker process against Redis and the test database."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.db import connection

from tests.conftest import REPO_ROOT


@pytest.fixture
def worker(redis_url, transactional_db, tmp_path):
    db = connection.settings_dict
    env = {**os.environ, "REDIS_URL": redis_url, "DEBUG": "1"}
    if db["ENGINE"].endswith("sqlite3"):
        env["DATABASE_URL"] = f"sqlite:///{db['NAME']}"
    else:
        env["DATABASE_URL"] = (
            f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "shop_assistant", "worker", "-P", "solo", "-l", "WARNING",
         "--without-gossip", "--without-mingle", "-n", f"test-{os.getpid()}@%h"],
        cwd=REPO_ROOT, env=env, stdout=open(tmp_path / "worker.log", "w"), stderr=subprocess.STDOUT,
    )
    yield env
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.services
def test_worker_runs_a_task_through_redis(worker, settings):
    from celery import Celery

    # Not the current app: shared tasks in later tests must keep resolving to the project's (eager) app.
    app = Celery("probe", broker=worker["REDIS_URL"], backend=worker["REDIS_URL"], set_as_current=False)
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=1.0):
        assert time.monotonic() < deadline, "the worker never answered"
    # Earlier tests ran eager tasks in this process, which leaves Celery's "inside a task" guard set;
    # this process is a client, not a task, so the guard doesn't apply.
    result = app.send_task("shop_assistant.health").get(timeout=60, disable_sync_subtasks=False)
    assert result["db"] is True
    assert result["vendor"] == connection.vendor
