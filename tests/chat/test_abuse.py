"""A hostile shopper: deep and huge frames, NUL bytes and lone surrogates, limits that survive reconnecting,
foreign origins, and connections that say nothing."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from shop_assistant.chat.models import Conversation, Message, WidgetSettings
from shop_assistant.runtime.limits import reset_shared_limits

from .conftest import ANSWERED, FRAME_TIMEOUT, ORIGIN, collect_answer

pytestmark = pytest.mark.usefixtures("chat_engine", "chat_settings")


@pytest.fixture(autouse=True)
def fresh_limits():
    reset_shared_limits()
    yield
    reset_shared_limits()


def communicator(app, path="/ws/chat/?store=demo", origin=ORIGIN, ip="10.0.0.1", host=None):
    headers = [(b"origin", origin.encode())] if origin else []
    if host:
        headers.append((b"host", host.encode()))
    comm = WebsocketCommunicator(app, path, headers=headers)
    comm.scope["client"] = (ip, 50000)
    return comm


async def receive(comm) -> dict:
    return json.loads(await comm.receive_from(timeout=FRAME_TIMEOUT))


async def open_chat(app, **kwargs):
    comm = communicator(app, **kwargs)
    connected, _ = await comm.connect(timeout=FRAME_TIMEOUT)
    assert connected
    ready = await receive(comm)
    assert ready["type"] == "ready", ready
    return comm, ready


async def still_open(comm) -> None:
    await comm.send_to(text_data=json.dumps({"type": "nonsense"}))
    assert (await receive(comm))["code"] == "unknown_type"


async def test_a_6000_deep_frame_gets_bad_json_and_the_socket_stays_open(asgi_app, demo_store):
    comm, _ = await open_chat(asgi_app)
    await comm.send_to(text_data="[" * 6000 + "]" * 6000)
    assert (await receive(comm))["code"] in {"bad_json", "frame_too_large"}
    await comm.send_to(text_data='{"type": "message", "text": ' + "[" * 3000 + "]" * 3000 + "}")
    assert (await receive(comm))["code"] in {"bad_json", "bad_frame"}
    await still_open(comm)
    await comm.disconnect()


async def test_a_1_mb_frame_gets_frame_too_large_and_the_socket_stays_open(asgi_app, demo_store):
    comm, _ = await open_chat(asgi_app)
    await comm.send_to(text_data=json.dumps({"type": "message", "text": "x" * 1_000_000}))
    assert (await receive(comm))["code"] == "frame_too_large"
    await still_open(comm)
    await comm.disconnect()


async def test_nul_bytes_and_lone_surrogates_are_cleaned_and_both_turns_stored(asgi_app, demo_store):
    comm, ready = await open_chat(asgi_app)
    # json.dumps writes the lone surrogate as the escape "\ud800", exactly what a hostile client can send.
    await comm.send_to(text_data=json.dumps({"type": "message", "text": "rain\x00 jacket \ud800?"}))
    answer = await collect_answer(lambda timeout: receive(comm))
    assert answer.end["finish_reason"] in ANSWERED
    await comm.disconnect()
    rows = await database_sync_to_async(
        lambda: list(Message.objects.filter(conversation_id=ready["conversation"]).order_by("created_at"))
    )()
    assert [row.role for row in rows] == ["user", "assistant"]
    assert rows[0].text == "rain jacket \ufffd?"
    assert "\x00" not in rows[0].model_text


async def test_the_conversation_row_is_created_with_the_first_message(asgi_app, demo_store):
    count = database_sync_to_async(Conversation.objects.count)
    quiet, _ = await open_chat(asgi_app)
    await quiet.disconnect()
    assert await count() == 0  # a connection that says nothing leaves nothing

    comm, ready = await open_chat(asgi_app)
    await comm.send_to(text_data=json.dumps({"type": "message", "text": "hello"}))
    await collect_answer(lambda timeout: receive(comm))
    await comm.disconnect()
    assert await count() == 1
    again, resumed = await open_chat(asgi_app, path=f"/ws/chat/?store=demo&resume={ready['resume_token']}")
    await again.disconnect()
    assert resumed["conversation"] == ready["conversation"]
    assert [h["role"] for h in resumed["history"]] == ["user", "assistant"]


async def test_the_message_limit_per_address_survives_reconnecting(asgi_app, demo_store, settings):
    settings.CHAT_LIMITS = {**settings.CHAT_LIMITS, "messages_per_minute_per_ip": 2}
    for _ in range(2):
        comm, _ = await open_chat(asgi_app, ip="10.0.0.7")
        await comm.send_to(text_data=json.dumps({"type": "message", "text": "hi"}))
        await collect_answer(lambda timeout: receive(comm))
        await comm.disconnect()
    comm, _ = await open_chat(asgi_app, ip="10.0.0.7")
    await comm.send_to(text_data=json.dumps({"type": "message", "text": "one more"}))
    frame = await receive(comm)
    assert frame["code"] == "rate_limited" and frame["retry_after"] > 0
    await still_open(comm)
    await comm.disconnect()
    other, _ = await open_chat(asgi_app, ip="10.0.0.8")  # another address is not limited
    await other.send_to(text_data=json.dumps({"type": "message", "text": "hi"}))
    await collect_answer(lambda timeout: receive(other))
    await other.disconnect()


async def test_open_connections_are_capped_per_address(asgi_app, demo_store, settings):
    settings.CHAT_LIMITS = {**settings.CHAT_LIMITS, "connections_per_ip": 2}
    first, _ = await open_chat(asgi_app, ip="10.0.0.9")
    second, _ = await open_chat(asgi_app, ip="10.0.0.9")
    third = communicator(asgi_app, ip="10.0.0.9")
    connected, _ = await third.connect(timeout=FRAME_TIMEOUT)
    assert connected
    frame = await receive(third)
    assert frame["code"] == "too_many_connections" and frame["limit"] == 2
    assert await third.receive_output(timeout=FRAME_TIMEOUT) == {"type": "websocket.close", "code": 4429}
    await first.disconnect()
    fourth, _ = await open_chat(asgi_app, ip="10.0.0.9")  # a closed one frees its place
    await second.disconnect()
    await fourth.disconnect()


def allow_origins(store, origins: str) -> None:
    WidgetSettings.objects.update_or_create(store=store, defaults={"allowed_origins": origins})


def other_store(origins: str):
    from catalog.models import Store

    store = Store.objects.create(slug="other", name="Other")
    allow_origins(store, origins)
    return store


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://testserver", None, True),
        ("ftp://testserver", None, False),
        ("http://testserver:9999", None, False),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("http://127.0.0.1:9999", "127.0.0.1:8000", False),
        ("https://127.0.0.1:8000", "127.0.0.1:8000", False),
        ("ftp://127.0.0.1:8000", "127.0.0.1:8000", False),
        ("http://evil.example", "evil.example", False),  # a Host header alone does not make a site ours
        ("https://shop.example.com", None, True),  # the store's own widget origin
        ("http://shop.example.com", None, False),
        ("https://shop.example.com:8443", None, False),
        ("https://a.brand.example", None, True),  # the store's subdomain pattern
        ("https://brand.example.evil", None, False),
    ],
)
async def test_the_origin_must_match_scheme_host_and_port(asgi_app, demo_store, origin, host, allowed):
    await database_sync_to_async(allow_origins)(demo_store, "https://shop.example.com\nhttps://.brand.example")
    comm = communicator(asgi_app, origin=origin, host=host)
    connected, _ = await comm.connect(timeout=FRAME_TIMEOUT)
    assert connected is allowed
    if connected:
        await comm.disconnect()


async def test_a_store_origin_is_not_allowed_for_another_store(asgi_app, demo_store):
    await database_sync_to_async(other_store)("https://other.example")
    comm = communicator(asgi_app, path="/ws/chat/?store=demo", origin="https://other.example")
    connected, _ = await comm.connect(timeout=FRAME_TIMEOUT)
    assert not connected


async def test_resuming_by_token_alone_is_judged_by_the_conversations_own_store(asgi_app, demo_store):
    """Before: ``?resume=`` without ``?store=`` was judged by the first store's origins (issue 39, item 8): the
    other store's own widget could not resume its chats, and the first store's widget could open the other's."""
    await database_sync_to_async(other_store)("https://other.example")
    await database_sync_to_async(allow_origins)(demo_store, "https://demo-widget.example")
    comm, ready = await open_chat(asgi_app, path="/ws/chat/?store=other", origin="https://other.example")
    await comm.disconnect()
    assert ready["store"]["slug"] == "other"
    resume = f"/ws/chat/?resume={ready['resume_token']}"

    comm, resumed = await open_chat(asgi_app, path=resume, origin="https://other.example")
    assert resumed["conversation"] == ready["conversation"] and resumed["store"]["slug"] == "other"
    await comm.disconnect()
    # The first store's widget origin does not open the other store's conversation.
    comm = communicator(asgi_app, path=resume, origin="https://demo-widget.example")
    connected, _ = await comm.connect(timeout=FRAME_TIMEOUT)
    assert not connected
