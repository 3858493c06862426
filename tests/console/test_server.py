"""Full stack: two real daphne processes on one Redis (and a Celery worker). The shopper chats on one, the agent
works in the console on the other: watches the tokens stream, takes over, replies; the shopper gets the reply and
the bot stays silent; hand back and the bot answers again."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import pytest
import websockets
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from tests.chat.conftest import ANSWERED, FRAME_TIMEOUT, Server, collect_answer, run_daphne, run_worker

from .conftest import session_cookie

pytestmark = [pytest.mark.slow, pytest.mark.services]


class Socket:
    def __init__(self, connection: Any) -> None:
        self.connection = connection

    async def receive(self, timeout: float = FRAME_TIMEOUT) -> dict[str, Any]:
        return json.loads(await asyncio.wait_for(self.connection.recv(), timeout))

    async def receive_until(self, predicate, timeout: float = FRAME_TIMEOUT) -> tuple[dict, list[dict]]:
        seen = []
        while True:
            seen.append(await self.receive(timeout))
            if predicate(seen[-1]):
                return seen[-1], seen

    async def nothing_for(self, seconds: float) -> bool:
        try:
            frame = await asyncio.wait_for(self.connection.recv(), seconds)
        except asyncio.TimeoutError:
            return True
        raise AssertionError(f"expected silence, got {frame}")

    async def send(self, frame: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(frame))


class StaffHttp:
    """The agent's browser, reduced to cookies: CSRF-protected POSTs to the console's views."""

    def __init__(self, server: Server, cookie: str) -> None:
        self.server, self.cookie, self.csrf = server, cookie, ""

    def _request(self, path: str, data: bytes | None = None) -> tuple[int, bytes, Any]:
        headers = {"Cookie": self.cookie + (f"; csrftoken={self.csrf}" if self.csrf else "")}
        if data is not None:
            headers |= {"X-CSRFToken": self.csrf, "Content-Type": "application/x-www-form-urlencoded"}
        request = urllib.request.Request(self.server.http + path, data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read(), response.headers

    async def get(self, path: str) -> bytes:
        status, body, headers = await asyncio.to_thread(self._request, path)
        assert status == 200
        for value in headers.get_all("Set-Cookie") or []:
            if value.startswith("csrftoken="):
                self.csrf = value.split(";")[0].split("=", 1)[1]
        return body

    async def post(self, path: str, **form: str) -> dict[str, Any]:
        from urllib.parse import urlencode

        status, body, _ = await asyncio.to_thread(self._request, path, urlencode(form).encode())
        assert status == 200, body
        return json.loads(body)


async def _once_written(staff: StaffHttp, path: str, timeout: float = 30.0) -> bytes:
    """A conversation's console page, once the Celery worker has written the conversation (its writes are
    queued: the shopper's answer can end before the row exists, a 404 until then)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            return await staff.get(path)
        except urllib.error.HTTPError as error:
            if error.code != 404 or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.2)


@pytest.fixture
def demo_agent_cookie(demo_store) -> str:
    return session_cookie(get_user_model().objects.get(username="agent"))


async def test_shopper_on_one_daphne_agent_on_another(
    console_redis_url, demo_store, demo_agent_cookie, tmp_path
):
    with (
        run_worker(tmp_path, console_redis_url),
        run_daphne(tmp_path, REDIS_URL=console_redis_url) as shop_server,
        run_daphne(tmp_path, REDIS_URL=console_redis_url) as staff_server,
    ):
        assert shop_server.port != staff_server.port
        staff = StaffHttp(staff_server, demo_agent_cookie)
        console_url = f"ws://127.0.0.1:{staff_server.port}/ws/console/"
        async with websockets.connect(console_url, origin=staff_server.http, proxy=None, open_timeout=30,
                                      additional_headers={"Cookie": demo_agent_cookie}) as c:
            console = Socket(c)
            assert (await console.receive())["agent"] == "Dana"

            async with websockets.connect(shop_server.ws + "?store=demo", origin=shop_server.http, proxy=None,
                                          open_timeout=30) as s:
                shopper = Socket(s)
                ready = await shopper.receive()
                conversation = ready["conversation"]
                # The new conversation shows up in the other process's inbox, through Redis.
                started, _ = await console.receive_until(lambda f: f["type"] == "inbox")
                assert (started["kind"], started["conversation"]) == ("started", conversation)
                await console.send({"type": "watch", "conversation": conversation})
                await console.receive_until(lambda f: f["type"] == "watching")

                # The agent watches the bot's tokens stream.
                await shopper.send({"type": "message", "text": "Do you have rain jackets?"})
                answer = await collect_answer(shopper.receive)
                _, seen = await console.receive_until(lambda f: f["type"] == "frame" and f["frame"]["type"] == "end")
                frames = [f["frame"] for f in seen if f["type"] == "frame"]
                assert frames[0]["text"] == "Do you have rain jackets?"
                assert "".join(f["text"] for f in frames if f["type"] == "token") == answer.text != ""

                # Take over on the staff server (a CSRF-protected POST), seen on the shop server.
                page = await _once_written(staff, f"/console/c/{conversation}/")
                assert b"Do you have rain jackets?" in page
                assert (await staff.post(f"/console/c/{conversation}/take"))["status"] == "agent"
                assert await shopper.receive() == {"type": "agent_joined", "agent": "Dana"}

                await shopper.send({"type": "message", "text": "Is anyone there?"})
                held, _ = await console.receive_until(lambda f: f["type"] == "frame")
                assert held["frame"] == {"type": "message", "role": "user", "text": "Is anyone there?", "held": True}
                await shopper.nothing_for(1.5)  # the bot stays silent

                assert (await staff.post(f"/console/c/{conversation}/reply", text="Hi, Dana here!"))["ok"]
                assert await shopper.receive() == {"type": "agent_message", "text": "Hi, Dana here!", "agent": "Dana"}
                await console.receive_until(lambda f: f["type"] == "agent_message")

                # Hand back: the bot answers again.
                assert (await staff.post(f"/console/c/{conversation}/hand-back"))["status"] == "bot"
                assert await shopper.receive() == {"type": "agent_left", "agent": "Dana"}
                await shopper.send({"type": "message", "text": "Thanks. Any tents?"})
                again = await collect_answer(shopper.receive)
                assert again.text and again.end["finish_reason"] in ANSWERED
                _, seen = await console.receive_until(lambda f: f["type"] == "frame" and f["frame"]["type"] == "end")
                assert "".join(f["frame"]["text"] for f in seen
                               if f["type"] == "frame" and f["frame"]["type"] == "token") == again.text

        def actions() -> list[str]:
            from shop_assistant.console.models import Action

            return list(Action.objects.filter(conversation_id=conversation).values_list("kind", flat=True))

        assert await database_sync_to_async(actions)() == ["take_over", "reply", "hand_back"]
