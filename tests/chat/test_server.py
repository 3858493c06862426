"""The same chat through a real daphne process and a real websocket client; once more with Redis and a worker."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import websockets
from channels.db import database_sync_to_async

from shop_assistant.chat.models import Message
from shop_assistant.chat.protocol.events import group_name

from .conftest import ANSWERED, FRAME_TIMEOUT, TEST_MAX_TOKENS, Answer, Server, collect_answer, run_daphne, run_worker

pytestmark = pytest.mark.slow


class Socket:
    """A `websockets` client connection speaking the chat protocol."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    async def receive(self, timeout: float = FRAME_TIMEOUT) -> dict[str, Any]:
        return json.loads(await asyncio.wait_for(self.connection.recv(), timeout))

    async def ask(self, text: str) -> Answer:
        await self.connection.send(json.dumps({"type": "message", "text": text}))
        return await collect_answer(self.receive)


def connect(server: Server, query: str = "?store=demo"):
    return websockets.connect(server.ws + query, origin=server.http, proxy=None, open_timeout=30)


async def chat_and_resume(server: Server) -> tuple[dict[str, Any], Answer]:
    async with connect(server) as connection:
        sock = Socket(connection)
        ready = await sock.receive()
        assert ready["type"] == "ready" and ready["history"] == []
        answer = await sock.ask("Do you sell rain jackets?")
    assert answer.text and answer.end["finish_reason"] in ANSWERED
    assert 1 <= answer.end["usage"]["completion_tokens"] <= TEST_MAX_TOKENS
    return ready, answer


def logged(conversation_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in Message.objects.filter(conversation_id=conversation_id).order_by("created_at")]


async def test_chat_through_daphne(daphne_server, demo_store):
    ready, answer = await chat_and_resume(daphne_server)
    assert answer.products and all(item["price"] for item in answer.products)

    async with connect(daphne_server, f"?store=demo&resume={ready['resume_token']}") as connection:
        resumed = await Socket(connection).receive()
    assert resumed["conversation"] == ready["conversation"]
    assert [(h["role"], h["text"]) for h in resumed["history"]] == [
        ("user", "Do you sell rain jackets?"),
        ("assistant", answer.text),
    ]
    assert resumed["history"][1]["products"] == answer.products
    # The log is written by a Celery task (eager here, in daphne's thread pool): give it a moment to show up.
    expected = [("user", "Do you sell rain jackets?"), ("assistant", answer.text)]
    deadline = time.monotonic() + 10
    # A fresh thread, so a fresh connection: never a snapshot an earlier test left open on the shared one.
    while (rows := await database_sync_to_async(logged, thread_sensitive=False)(ready["conversation"])) != expected:
        assert time.monotonic() < deadline, rows
        await asyncio.sleep(0.2)


async def test_daphne_refuses_a_foreign_origin(daphne_server, demo_store):
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        async with websockets.connect(daphne_server.ws, origin="https://evil.example", proxy=None, open_timeout=30):
            pass
    assert refused.value.response.status_code == 403


async def test_storefront_page_embeds_the_widget_and_lists_products(daphne_server, demo_store):
    import urllib.request

    def fetch(path: str) -> tuple[int, str, str]:
        with urllib.request.urlopen(daphne_server.http + path, timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()

    status, _, page = await asyncio.to_thread(fetch, "/")
    assert status == 200
    assert '<script src="/static/widget/widget.js" data-store="demo" async></script>' in page
    product = await database_sync_to_async(lambda: demo_store.products.order_by("title").first())()
    assert product.title in page
    status, content_type, script = await asyncio.to_thread(fetch, "/static/widget/widget.js")
    assert status == 200 and "javascript" in content_type and "renderMarkdown" in script


@pytest.mark.services
async def test_chat_with_the_redis_layer_and_a_celery_worker(redis_url, demo_store, tmp_path):
    """Full stack: channels-redis, the log written by a separate worker process, agent messages across processes."""
    from channels_redis.core import RedisChannelLayer

    with run_worker(tmp_path, redis_url) as worker, run_daphne(tmp_path, REDIS_URL=redis_url) as server:
        ready, answer = await chat_and_resume(server)

        # The worker (not daphne) writes the log; wait for it.
        expected = [("user", "Do you sell rain jackets?"), ("assistant", answer.text)]
        deadline = time.monotonic() + 60
        while await database_sync_to_async(logged)(ready["conversation"]) != expected:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            await asyncio.sleep(0.2)
        worker_log = (tmp_path / "worker.log").read_text()
        assert "chat.log_message" in worker_log and "succeeded" in worker_log

        async with connect(server, f"?store=demo&resume={ready['resume_token']}") as connection:
            sock = Socket(connection)
            resumed = await sock.receive()
            assert [(h["role"], h["text"]) for h in resumed["history"]] == expected

            # An agent's message from another process reaches the shopper through Redis.
            layer = RedisChannelLayer(hosts=[redis_url])
            await layer.group_send(
                group_name(ready["conversation"]),
                {"type": "chat.agent_message", "text": "Hello from the console", "agent": "Ana"},
            )
            frame = await sock.receive()
            assert frame == {"type": "agent_message", "text": "Hello from the console", "agent": "Ana"}
            await layer.close_pools()
