"""A node dies mid-answer: the shopper resumes on another node with the history, the cut answer ended with the
notice, nothing lost; the console on the surviving node still sees the conversation.

Two real daphne processes on one Redis and the test database, a Celery worker writing the log, a real websocket
client (``websockets``) doing what the widget does: connect through nginx (deploy/nginx.conf), and reconnect
with its resume token through nginx, which sends it to the node that is left. The node is killed with SIGKILL:
no shutdown code runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from dataclasses import dataclass

import pytest
import websockets
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from shop_assistant.chat.models import Message
from shop_assistant.chat.protocol.session import INTERRUPTED_NOTICE
from tests.console.conftest import session_cookie
from tests.console.test_server import Socket, StaffHttp

from tests.deploy.nginx import run_nginx

from .conftest import ANSWERED, Server, collect_answer, free_port, run_daphne, run_worker

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


def _connect(url: str, origin: str, **kwargs):
    return websockets.connect(url, origin=origin, proxy=None, open_timeout=60, **kwargs)


@dataclass
class Nodes:
    """Two nodes behind nginx: the one ``demo`` hashes to (killed in each run, then started again on its port,
    under its name) and the other, which stays up and holds the console."""

    front: str  # nginx
    doomed_port: int
    doomed_name: str
    survivor: Server
    survivor_name: str

    def chat_url(self, query: str = "") -> str:
        return self.front.replace("http://", "ws://") + "/ws/chat/?store=demo" + query


async def _node_of_demo(front: str) -> str:
    async with _connect(front.replace("http://", "ws://") + "/ws/chat/?store=demo", front) as s:
        return (await Socket(s).receive())["node"]


async def _routed_to(nodes: Nodes, name: str, timeout: float = 60.0) -> None:
    """nginx takes a node that failed out of the ring for its fail_timeout (deploy/nginx-nodes.conf): wait until
    ``demo`` goes to ``name`` again."""
    deadline = time.monotonic() + timeout
    while (node := await _node_of_demo(nodes.front)) != name:
        assert time.monotonic() < deadline, f"demo still routed to {node}, not {name}"
        await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def _session_on(nodes: Nodes, name: str, timeout: float = 60.0):
    """A shopper's session on node ``name``. nginx's passive checks may take a node that has just started out of
    the ring again between one connection and the next (a connection it failed while the node was loading), so
    the session is opened again until ``name`` answers it, not only until a probe was routed there once."""
    deadline = time.monotonic() + timeout
    while True:
        await _routed_to(nodes, name, timeout=max(1.0, deadline - time.monotonic()))
        async with _connect(nodes.chat_url(), nodes.front) as s:
            shopper = Socket(s)
            ready = await shopper.receive()
            if ready["node"] == name:
                yield shopper, ready
                return
        assert time.monotonic() < deadline, f"no session on {name} within {timeout} s (last: {ready['node']})"
        await asyncio.sleep(0.5)


async def _one_failover(tmp_path, redis_url: str, nodes: Nodes, console: Socket, staff: StaffHttp) -> float:
    # Long answers on the node that dies, so that it dies mid-answer.
    with run_daphne(tmp_path, nodes.doomed_port, REDIS_URL=redis_url, CHAT_MAX_TOKENS="200",
                    NODE_NAME=nodes.doomed_name) as doomed:
        async with _session_on(nodes, nodes.doomed_name) as (shopper, ready):
            conversation, token = ready["conversation"], ready["resume_token"]
            await shopper.send({"type": "message", "text": QUESTION})
            started, _ = await console.receive_until(
                lambda f: f["type"] == "inbox" and f["kind"] == "started" and f["conversation"] == conversation
            )
            await console.send({"type": "watch", "conversation": conversation})
            await console.receive_until(lambda f: f["type"] == "watching")

            _, before = await shopper.receive_until(lambda f: f["type"] == "token")  # the answer is being written
            cut_answer = next(f["message_id"] for f in before if f["type"] == "start")
            doomed.process.kill()
            killed = time.perf_counter()
            doomed.process.wait(timeout=30)
            with pytest.raises(websockets.ConnectionClosed):
                await shopper.receive_until(lambda f: f["type"] == "end", timeout=30)

    # The widget reconnects with its token, through nginx, which sends it to the node that is left.
    async with _connect(nodes.chat_url(f"&resume={token}"), nodes.front) as s:
        shopper = Socket(s)
        ready = await shopper.receive()
        resumed = time.perf_counter() - killed
        assert ready["type"] == "ready" and ready["conversation"] == conversation
        assert ready["node"] == nodes.survivor_name
        history = ready["history"]
        assert history[1].pop("message_id") == cut_answer  # the widget rates and asks again by it
        assert all(item.pop("at") for item in history)  # when each was said (the widget shows the time)
        assert history == [
            {"role": "user", "text": QUESTION},
            {"role": "assistant", "text": "", "interrupted": True, "notice": INTERRUPTED_NOTICE},
        ]
        # Asked again, on the surviving node: answered, and the console there sees it.
        await shopper.send({"type": "message", "text": QUESTION})
        answer = await collect_answer(shopper.receive)
        assert answer.end["finish_reason"] in ANSWERED
        seen, _ = await console.receive_until(
            lambda f: f["type"] == "frame" and f["frame"]["type"] == "message" and f["conversation"] == conversation
        )
        assert seen["frame"]["text"] == QUESTION
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
    failover_redis_url, demo_store, tmp_path, record_property
):
    cookie = await database_sync_to_async(lambda: session_cookie(get_user_model().objects.get(username="agent")))()
    timings = []
    ports = {"node-a": free_port(), "node-b": free_port()}
    with contextlib.ExitStack() as stack:
        stack.enter_context(run_worker(tmp_path, failover_redis_url))
        first = {name: stack.enter_context(run_daphne(tmp_path, port, REDIS_URL=failover_redis_url, NODE_NAME=name))
                 for name, port in ports.items()}
        front = f"http://127.0.0.1:{stack.enter_context(run_nginx(tmp_path, list(ports.values())))}"
        doomed_name = await _node_of_demo(front)
        survivor_name = next(name for name in ports if name != doomed_name)
        first[doomed_name].process.terminate()  # each run starts it again, to kill it mid-answer
        first[doomed_name].process.wait(timeout=30)
        nodes = Nodes(front, ports[doomed_name], doomed_name, first[survivor_name], survivor_name)

        staff = StaffHttp(nodes.survivor, cookie)
        async with websockets.connect(
            f"ws://127.0.0.1:{nodes.survivor.port}/ws/console/", origin=nodes.survivor.http, proxy=None,
            open_timeout=60, additional_headers={"Cookie": cookie},
        ) as c:
            console = Socket(c)
            assert (await console.receive())["agent"] == "Dana"
            for _ in range(RUNS):
                timings.append(await _one_failover(tmp_path, failover_redis_url, nodes, console, staff))
    record_property("kill_to_resumed_history_ms", [round(t * 1000) for t in timings])
    print(f"\nkill -> resumed history through nginx: median {statistics.median(timings) * 1000:.0f} ms over "
          f"{len(timings)} runs: " + ", ".join(f"{t * 1000:.0f}" for t in timings))
