"""The websocket client the tools share: a shopper on the chat's socket, an agent on the console's, and one
message's answer read to its end (the frames: docs/chat-protocol.md). Only for servers on this machine."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def origin_of(url: str) -> str:
    """The Origin a browser on the server's own pages sends (ws:// and http:// give http, wss:// and https://
    give https): the chat accepts only allowed origins."""
    parts = urlsplit(url)
    return f"{'https' if parts.scheme in {'wss', 'https'} else 'http'}://{parts.netloc}"


def ws_url(http: str, path: str) -> str:
    """The websocket address of ``path`` on the server at ``http`` (http://host:port)."""
    return http.replace("http", "ws", 1).rstrip("/") + path


async def receive(connection: Any) -> dict[str, Any]:
    return json.loads(await connection.recv())


@asynccontextmanager
async def connect(
    url: str, origin: str, *, first: str = "ready", timeout: float = 60.0, cookie: str | None = None
) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """A connection and its first frame, which must be of type ``first`` (the chat's ``ready``, the console's
    ``hello``). ``cookie``: a logged-in session (the console wants a staff member)."""
    import websockets  # the tools' own dependency (requirements/test.in), not the product's

    # No size or queue limit: a slow reader would otherwise hold the server back and skew what is measured.
    async with websockets.connect(
        url, origin=origin, proxy=None, open_timeout=timeout, max_size=None, max_queue=None,
        additional_headers={"Cookie": cookie} if cookie else None,
    ) as connection:
        frame = await receive(connection)
        if frame.get("type") != first:
            raise RuntimeError(f"expected {first}, got {frame}")
        yield connection, frame


@dataclass
class Answer:
    """What came back for one message, timed with ``time.perf_counter`` from its sending."""

    sent: float = 0.0
    message_id: str | None = None
    first_token: float | None = None
    done: float | None = None
    end: dict[str, Any] | None = None  # the `end` frame (finish_reason, usage, timing), if it ended
    error: dict[str, Any] | None = None  # the `error` frame, if it failed

    @property
    def first_token_ms(self) -> float | None:
        return None if self.first_token is None else (self.first_token - self.sent) * 1000

    @property
    def total_ms(self) -> float | None:
        return None if self.done is None else (self.done - self.sent) * 1000


async def ask(connection: Any, text: str, answer: Answer | None = None) -> Answer:
    """Send ``text`` as the shopper and read frames until its answer ends or fails. ``answer``: the record to
    fill in as the frames come, so that a caller keeps what came before a timeout or a closed socket."""
    answer = answer if answer is not None else Answer()
    answer.sent = time.perf_counter()
    await connection.send(json.dumps({"type": "message", "text": text}))
    while True:
        frame = await receive(connection)
        if frame["type"] == "start":
            answer.message_id = frame["message_id"]
        elif frame["type"] == "token" and answer.first_token is None:
            answer.first_token = time.perf_counter()
        elif frame["type"] in ("end", "error"):
            answer.done = time.perf_counter()
            setattr(answer, frame["type"], frame)
            return answer
