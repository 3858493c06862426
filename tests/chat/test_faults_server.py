"""Faults with real processes: Redis down under daphne, a Celery worker child killed mid-write."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from shop_assistant.chat.models import Message
from shop_assistant.chat.conversations import new_conversation
from shop_assistant.chat.writes import MessageRecord
from tests.conftest import REPO_ROOT

from .conftest import ANSWERED, free_port, hold_write_lock, run_daphne, subprocess_env

pytestmark = pytest.mark.slow


def _rows(conversation: str) -> list[tuple[str, str]]:
    return list(Message.objects.filter(conversation_id=conversation).order_by("created_at").values_list("role", "text"))


def test_with_redis_down_the_shopper_still_gets_answers_and_readyz_says_why(demo_store, tmp_path):
    import websockets

    dead = f"redis://127.0.0.1:{free_port()}/0"
    with run_daphne(tmp_path, REDIS_URL=dead, CHAT_SPOOL_DIR=str(tmp_path / "spool")) as server:

        async def chat() -> tuple[dict, list[dict]]:
            async with websockets.connect(f"{server.ws}?store=demo", origin=server.http, proxy=None,
                                          open_timeout=120) as ws:
                ready = json.loads(await ws.recv())
                notice = json.loads(await ws.recv())
                await ws.send(json.dumps({"type": "message", "text": "Do you sell tents?"}))
                frames = []
                while not frames or frames[-1]["type"] not in ("end", "error"):
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 180)))
                return ready | {"notice": notice}, frames

        ready, frames = asyncio.run(chat())
        assert ready["type"] == "ready"
        assert ready["notice"]["type"] == "notice" and ready["notice"]["code"] == "agents_unavailable"
        assert frames[-1]["type"] == "end" and frames[-1]["finish_reason"] in ANSWERED
        try:
            urllib.request.urlopen(f"{server.http}/readyz", timeout=60)
            raise AssertionError("readyz answered 200 with Redis down")
        except urllib.error.HTTPError as error:
            assert error.code == 503
            body = json.loads(error.read())
        assert body["checks"]["channel_layer"]["ok"] is False and body["checks"]["broker"]["ok"] is False
        assert body["checks"]["database"]["ok"] is True and "channel_layer" in body["reason"]
        # The broker being down, the log was written directly: nothing lost.
        deadline = time.monotonic() + 30
        while len(_rows(ready["conversation"])) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert [role for role, _ in _rows(ready["conversation"])] == ["user", "assistant"]
        assert "1011" not in server.log_text()


@pytest.mark.services
@pytest.mark.heavy
def test_a_worker_child_killed_mid_write_gets_the_message_redelivered(transactional_db, redis_url, tmp_path):
    import psutil
    from celery import Celery

    from catalog.models import Store

    redis_url = redis_url.rsplit("/", 1)[0] + "/11"  # its own database: other runs' workers share db 15
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    store = Store.objects.create(slug="k", name="K")
    conversation, _ = new_conversation(store)
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "shop_assistant", "worker", "-P", "prefork", "-c", "1", "-l", "INFO",
         "--without-gossip", "--without-mingle", "-n", f"kill-test-{os.getpid()}@%h"],
        cwd=REPO_ROOT, env=subprocess_env(REDIS_URL=redis_url, ENGINE_AUTOSTART="0", SQLITE_BUSY_TIMEOUT="60"),
        stdout=log.open("w"), stderr=subprocess.STDOUT,
    )
    lock = None
    try:
        deadline = time.monotonic() + 120
        while "ready." not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "ready." in log.read_text(), log.read_text()
        lock = hold_write_lock("IMMEDIATE")
        record = MessageRecord(conversation.id, "user", "survive the kill")
        Celery(broker=redis_url, set_as_current=False).send_task("chat.log_message", args=[record.payload()])
        deadline = time.monotonic() + 60
        while "Received task" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # the child is now blocked inside the write
        children = psutil.Process(worker.pid).children()
        assert children, "no pool child"
        for child in children:
            os.kill(child.pid, signal.SIGKILL)
        time.sleep(2.0)
        lock.rollback() if hasattr(lock, "rollback") else None
        lock.close()
        lock = None
        deadline = time.monotonic() + 90
        while not Message.objects.filter(pk=record.id).exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        text = log.read_text()
        assert Message.objects.filter(pk=record.id).exists(), text[-3000:]
        assert "WorkerLostError" in text or "exited" in text or "SIGKILL" in text
    finally:
        if lock is not None:
            lock.close()
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
