"""A shopper's message is kept once, before it is answered: the `ack`, a message sent again, a hung database.

Through the ASGI app on the real engine. The kill -9 runs against a real daphne are in test_faults_server.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from channels.db import database_sync_to_async

from catalog.models import Store
from shop_assistant.chat.log import keeping, spool
from shop_assistant.chat.models import Conversation, Message, hash_token, new_resume_token
from shop_assistant.chat.log.writes import MessageRecord, client_message_id, write_message

from .conftest import ANSWERED, collect_answer, hold_write_lock

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chat_engine", "chat_settings")]


@pytest.fixture
def spool_dir(settings, tmp_path):
    settings.CHAT_SPOOL_DIR = tmp_path / "spool"
    return settings.CHAT_SPOOL_DIR


def rows(client_id: str) -> list[Message]:
    return list(Message.objects.filter(client_id=client_id))


async def test_a_message_is_stored_then_acked_then_answered(ws, demo_store, spool_dir):
    shopper = await ws()
    client_id = str(uuid.uuid4())
    await shopper.send({"type": "message", "text": "Do you sell tents?", "client_id": client_id})
    ack = await shopper.receive()
    # Acknowledged before anything of the answer, and only once the row is there.
    assert ack["type"] == "ack" and ack["client_id"] == client_id and ack["duplicate"] is False
    stored = await database_sync_to_async(rows)(client_id)
    assert [(m.role, m.text) for m in stored] == [("user", "Do you sell tents?")]
    answer = await collect_answer(shopper.receive)
    assert answer.start["message_id"] == ack["message_id"]
    assert answer.end["finish_reason"] in ANSWERED
    await shopper.close()

    # The widget did not get the `ack` (say) and sends it again after a reconnect: acked, not stored nor answered twice.
    again = await ws(f"/ws/chat/?store=demo&resume={shopper.ready['resume_token']}")
    assert [item.get("client_id") for item in again.ready["history"]] == [client_id, None]
    await again.send({"type": "message", "text": "Do you sell tents?", "client_id": client_id})
    assert await again.receive() == {"type": "ack", "client_id": client_id, "message_id": None, "duplicate": True}
    assert await again.comm.receive_nothing(timeout=1)
    stored = await database_sync_to_async(rows)(client_id)
    assert len(stored) == 1
    count = await database_sync_to_async(Message.objects.filter(conversation_id=stored[0].conversation_id).count)()
    assert count == 2  # the message and its one answer


def _kept_but_not_answered(client_id: uuid.UUID) -> str:
    """A server killed right after keeping a message: its row, no answer."""
    token = new_resume_token()
    conversation = Conversation.objects.create(store=Store.objects.get(slug="demo"), resume_token_hash=hash_token(token))
    write_message(
        MessageRecord(conversation.id, "user", "Do you have rain jackets?", id=client_message_id(conversation.id, client_id),
                      client_id=client_id, keep=True).payload()
    )
    return token


async def test_a_message_kept_but_never_answered_is_answered_when_sent_again(ws, demo_store, spool_dir):
    client_id = uuid.uuid4()
    token = await database_sync_to_async(_kept_but_not_answered)(client_id)
    shopper = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert [item["text"] for item in shopper.ready["history"]] == ["Do you have rain jackets?"]
    await shopper.send({"type": "message", "text": "Do you have rain jackets?", "client_id": str(client_id)})
    ack = await shopper.receive()
    assert ack["duplicate"] is True and ack["message_id"]
    answer = await collect_answer(shopper.receive)
    assert answer.start["message_id"] == ack["message_id"] and answer.end["finish_reason"] in ANSWERED
    # Said once to the model too: the history's copy of the message was not put in the prompt a second time.
    assert answer.end["usage"]["prompt_tokens"] < 1000
    stored = await database_sync_to_async(rows)(str(client_id))
    assert len(stored) == 1 and stored[0].model_text  # the later write gave it what the model saw


async def test_a_malformed_client_id_is_refused_and_a_refusal_names_the_message(ws, demo_store, spool_dir):
    shopper = await ws()
    await shopper.send({"type": "message", "text": "hi", "client_id": "not-a-uuid"})
    assert (await shopper.receive())["code"] == "bad_frame"
    client_id = str(uuid.uuid4())
    await shopper.send({"type": "message", "text": "   ", "client_id": client_id})
    assert await shopper.receive() == {"type": "error", "code": "empty_message", "message": "the message is empty",
                                       "client_id": client_id}


async def test_a_hung_database_spools_the_message_and_the_answers_go_on(ws, demo_store, spool_dir, settings):
    """Another process holds SQLite's write lock (PostgreSQL: the table's) far longer than the writes' deadline:
    every shopper still gets the `ack`, `start` and the answer within seconds, and each message is stored once
    when the lock goes."""
    settings.CHAT_WRITE_TIMEOUT = 1.0
    shoppers = [await ws() for _ in range(3)]
    lock = await database_sync_to_async(hold_write_lock)()
    try:
        started = time.monotonic()
        ids = [str(uuid.uuid4()) for _ in shoppers]

        async def ask(shopper, client_id: str, text: str) -> float:
            await shopper.send({"type": "message", "text": text, "client_id": client_id})
            ack = await shopper.receive(30)
            assert ack["type"] == "ack" and ack["client_id"] == client_id, ack
            answer = await collect_answer(shopper.receive, timeout=30)
            assert answer.end["finish_reason"] in ANSWERED
            return time.monotonic() - started

        texts = ["Do you sell tents?", "Do you have rain jackets?", "What is your return policy?"]
        waited = await asyncio.gather(*(ask(s, i, t) for s, i, t in zip(shoppers, ids, texts)))
        assert max(waited) < 15, waited  # before: nobody got even `start` while the lock was held
        assert spool.depth() >= 3
    finally:
        await database_sync_to_async(lock.close)()
    # The writes given up on finish too once the lock is gone (each the same row again), and the spool is replayed
    # (by the replayer thread every 10 s; here at once).
    deadline = time.monotonic() + 60
    while (keeping.in_flight() or spool.depth()) and time.monotonic() < deadline:
        await database_sync_to_async(spool.replay)()
        await asyncio.sleep(0.2)
    assert keeping.in_flight() == 0 and spool.depth() == 0
    for client_id, text in zip(ids, texts):
        stored = await database_sync_to_async(rows)(client_id)
        assert [m.text for m in stored] == [text]
