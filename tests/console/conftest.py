"""Console fixtures: two stores, one person per role, conversations, and a logged-in console socket."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client as HttpClient
from django.utils import timezone

from catalog.models import Store
from shop_assistant.chat.models import Conversation, Message, hash_token, new_resume_token
from shop_assistant.console.models import StoreMembership

# The chat's fixtures (engine, demo store, shopper sockets), for the live tests.
from tests.chat.conftest import (  # noqa: F401
    FRAME_TIMEOUT,
    ORIGIN,
    asgi_app,
    chat_engine,
    chat_settings,
    demo_store,
    ws,
)

ROLES = ["anonymous", "plain", "other_agent", "agent", "owner", "superuser"]
# Who may see a conversation of store A.
ALLOWED = {"agent", "owner", "superuser"}


def make_conversation(store: Store, status: str = "bot", **extra: Any) -> Conversation:
    return Conversation.objects.create(
        store=store, resume_token_hash=hash_token(new_resume_token()), status=status, **extra
    )


def add_message(conversation: Conversation, role: str, text: str, **extra: Any) -> Message:
    return Message.objects.create(conversation=conversation, role=role, text=text, created_at=timezone.now(), **extra)


@dataclass
class World:
    store_a: Store
    store_b: Store
    users: dict[str, Any]


def build_world(store_a: Store | None = None) -> World:
    User = get_user_model()
    a = store_a or Store.objects.create(slug="alpha", name="Alpha")
    b = Store.objects.create(slug="beta", name="Beta")
    users: dict[str, Any] = {"anonymous": None}
    users["plain"] = User.objects.create_user("plain", "plain@example.com", "pw")
    users["other_agent"] = User.objects.create_user("other", "other@example.com", "pw", first_name="Otto")
    StoreMembership.objects.create(user=users["other_agent"], store=b, role="agent")
    users["agent"] = User.objects.create_user("dana", "dana@example.com", "pw", first_name="Dana")
    StoreMembership.objects.create(user=users["agent"], store=a, role="agent")
    users["owner"] = User.objects.create_user("olivia", "olivia@example.com", "pw", first_name="Olivia")
    StoreMembership.objects.create(user=users["owner"], store=a, role="owner")
    users["superuser"] = User.objects.create_superuser("root", "root@example.com", "pw")
    return World(a, b, users)


@pytest.fixture
def world(db) -> World:
    return build_world()


def http_client(user: Any) -> HttpClient:
    client = HttpClient()
    if user is not None:
        client.force_login(user)
    return client


def session_cookie(user: Any) -> str:
    """A Cookie header value of a logged-in session (empty for anonymous)."""
    if user is None:
        return ""
    client = http_client(user)
    return f"sessionid={client.cookies['sessionid'].value}"


class Console:
    """A console websocket (WebsocketCommunicator) logged in as someone."""

    def __init__(self, app: Any, cookie: str, origin: str = ORIGIN) -> None:
        from channels.testing import WebsocketCommunicator

        headers = [(b"origin", origin.encode())]
        if cookie:
            headers.append((b"cookie", cookie.encode()))
        self.comm = WebsocketCommunicator(app, "/ws/console/", headers=headers)

    async def connect(self) -> dict[str, Any]:
        connected, _ = await self.comm.connect(timeout=FRAME_TIMEOUT)
        assert connected
        return await self.receive()

    async def receive(self, timeout: float = FRAME_TIMEOUT) -> dict[str, Any]:
        output = await self.comm.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return {"type": "closed", "code": output.get("code")}
        return json.loads(output["text"])

    async def receive_until(self, predicate, timeout: float = FRAME_TIMEOUT) -> tuple[dict[str, Any], list]:
        seen = []
        while True:
            frame = await self.receive(timeout)
            seen.append(frame)
            if predicate(frame):
                return frame, seen

    async def send(self, frame: dict[str, Any]) -> None:
        await self.comm.send_to(text_data=json.dumps(frame))

    async def close(self) -> None:
        await self.comm.disconnect(timeout=FRAME_TIMEOUT)


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # Six accounts per test: PBKDF2 would make the setup the slowest part.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def console_redis_url(redis_url) -> str:
    """The test Redis, on a database of the console tests' own (13): Celery queues and channel-layer groups
    (``console.store.<id>``) are per database, so a worker or daphne of another test run on the same Redis can
    neither take this test's tasks nor hear its events."""
    import redis

    base, _, db = redis_url.rpartition("/")
    url = f"{base}/13" if db.isdigit() else redis_url.rstrip("/") + "/13"
    redis.Redis.from_url(url).flushdb()  # tasks left queued by an earlier, interrupted run
    return url
