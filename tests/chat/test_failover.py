"""A node dies mid-answer: the shopper resumes on another node with the history, the cut answer ended with the
notice, nothing lost; the console on the surviving node still sees the conversation.

Two real daphne processes on one Redis and the test database, a Celery worker writing the log, a real websocket
client (``websockets``) doing what the widget does: reconnect with its resume token (through nginx it lands on
the other node; here it connects there itself). The node is killed with SIGKILL: no shutdown code runs.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
import websockets
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from shop_assistant.chat.models import Message
from shop_assistant.chat.session import INTERRUPTED_NOTICE
from tests.console.conftest import session_cookie
from tests.console.test_server import Socket, StaffHttp

from .conftest import ANSWERED, collect_answer, run_daphne, run_worker

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.services]

RUNS = 5
QUESTION = "Do you have rain jackets? Tell me everything about each of them."


@pytest.fixture
def failover_redis_url(redis_url) -> str:
    """A Redis database of these tests' own (12), emptied first (see tests/console/conftest.py for why)."""
    import redis

    base, _, db = redis_url.rpartition("/")
    url = f"{base}/12" if db.isdigit() else redis_url.rstrip("/") + "/12"
    redis.Redis.from_url(url).flushdb()
    return url


def _messages(conversation: str) -> list[tuple[str, str, str]]:
    return list(
        Message.objects.filter(conversation_id=conversation)
        .order_by("created_at")
        .values_list("role", "text", "finish_reason")
    )


def _connect(server, path: str = "?store=demo", **kwargs):
    return websockets.connect(server.ws + path, origin=server.http, proxy=None, open_timeout=60, **kwargs)


async def _one_failover(tmp_path, redis_url: str, survivor, console: Socket, staff: StaffHttp) -> float:
    # Long answers on the node that dies, so that it dies mid-answer.
    with run_daphne(tmp_path, REDIS_URL=redis_url, CHAT_MAX_TOKENS="200") as doomed:
        async with _connect(doomed) as s:
            shopper = Socket(s)
            ready = await shopper.receive()
            conversation, token = ready["conversation"], ready["resume_token"]
            started, _ = await console.receive_until(lambda f: f["type"] == "inbox" and f["kind"] == "started")
            assert started["conversation"] == conversation
            await console.send({"type": "watch", "conversation": conversation})
            await console.receive_until(lambda f: f["type"] == "watching")

            await shopper.send({"type": "message", "text": QUESTION})
            await shopper.receive_until(lambda f: f["type"] == "token")  # the answer is being written
            doomed.process.kill()
            killed = time.perf_counter()
            doomed.process.wait(timeout=30)
            with pytest.raises(websockets.ConnectionClosed):
                await shopper.receive_until(lambda f: f["type"] == "end", timeout=30)

    # The widget reconnects with its token; nginx sends it to the node that is left.
    async with _connect(survivor, f"?store=demo&resume={token}") as s:
        shopper = Socket(s)
        ready = await shopper.receive()
        resumed = time.perf_counter() - killed
        assert ready["type"] == "ready" and ready["conversation"] == conversation
        assert ready["history"] == [
            {"role": "user", "text": QUESTION},
            {"role": "assistant", "text": "", "interrupted": True, "notice": INTERRUPTED_NOTICE},
        ]
        # Asked again, on the surviving node: answered, and the console there sees it.
        await shopper.send({"type": "message", "text": QUESTION})
        answer = await collect_answer(shopper.receive)
        assert answer.end["finish_reason"] in ANSWERED
        seen, _ = await console.receive_until(lambda f: f["type"] == "frame" and f["frame"]["type"] == "message")
        assert seen["conversation"] == conversation and seen["frame"]["text"] == QUESTION
        await console.receive_until(lambda f: f["type"] == "frame" and f["frame"]["type"] == "end")
    page = await staff.get(f"/console/c/{conversation}/")
    assert QUESTION.encode() in page.replace(b"&#x27;", b"'").replace(b"&#39;", b"'")

    # In the database: each question exactly once, the cut answer ended as interrupted, the second answered.
    deadline = time.monotonic() + 30
    while True:
        rows = await database_sync_to_async(_messages)(conversation)
        if len(rows) == 4 and all(finish for role, _, finish in rows if role == "assistant") or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert [(role, text) for role, text, _ in rows if role == "user"] == [("user", QUESTION), ("user", QUESTION)]
    assert [finish for role, _, finish in rows if role == "assistant"] == ["interrupted", answer.end["finish_reason"]]
    return resumed


async def test_a_node_killed_mid_answer_loses_nothing_and_the_shopper_resumes_elsewhere(
    failover_redis_url, demo_store, tmp_path
):
    cookie = await database_sync_to_async(lambda: session_cookie(get_user_model().objects.get(username="agent")))()
    timings = []
    with (
        run_worker(tmp_path, failover_redis_url),
        run_daphne(tmp_path, REDIS_URL=failover_redis_url) as survivor,
    ):
        staff = StaffHttp(survivor, cookie)
        async with websockets.connect(
            f"ws://127.0.0.1:{survivor.port}/ws/console/", origin=survivor.http, proxy=None, open_timeout=60,
            additional_headers={"Cookie": cookie},
        ) as c:
            console = Socket(c)
            assert (await console.receive())["agent"] == "Dana"
            for _ in range(RUNS):
                timings.append(await _one_failover(tmp_path, failover_redis_url, survivor, console, staff))
    print(f"\nkill -> resumed history: median {statistics.median(timings) * 1000:.0f} ms over {len(timings)} runs: "
          + ", ".join(f"{t * 1000:.0f}" for t in timings))
