"""A shopper's message that can be saved nowhere: the shopper is told, never left with a normal ending.

The database refuses every write (tests/conftest.py ``read_only_database``: the database's own read-only mode)
and the spool folder cannot be created (``unwritable_spool``), so the write, its retries and the spool all fail
as they would on a server; the engine is the real one.
"""

from __future__ import annotations

import logging

import pytest
from channels.db import database_sync_to_async

from catalog.models import Store
from shop_assistant.chat.models import Conversation, Message, hash_token, new_resume_token

from .conftest import ANSWERED, collect_answer

pytestmark = pytest.mark.slow

NOT_SAVED = "your message could not be saved; please send it again"


async def test_an_answer_whose_message_could_not_be_saved_ends_with_not_saved(
    ws, demo_store, chat_engine, chat_settings, read_only_database, unwritable_spool, caplog
):
    shopper = await ws()
    await database_sync_to_async(read_only_database.start)()
    with caplog.at_level(logging.ERROR):
        await shopper.send({"type": "message", "text": "Do you sell tents?"})
        answer = await collect_answer(shopper.receive)
        frame = await shopper.receive(30)
    # The answer itself arrives, and ends as usual, so the widget is not stuck; then it is told.
    assert answer.end["finish_reason"] in ANSWERED
    assert frame == {"type": "error", "code": "not_saved", "message": NOT_SAVED, "text": "Do you sell tents?",
                     "message_id": answer.start["message_id"]}
    assert "NOT saved" in caplog.text
    assert await database_sync_to_async(Message.objects.count)() == 0
    assert not unwritable_spool.exists()


def _held_conversation() -> tuple[Conversation, str]:
    token = new_resume_token()
    conversation = Conversation.objects.create(
        store=Store.objects.get(slug="demo"), resume_token_hash=hash_token(token), status=Conversation.Status.AGENT
    )
    return conversation, token


async def test_a_message_for_a_person_that_could_not_be_saved_is_reported_at_once(
    ws, demo_store, chat_engine, chat_settings, read_only_database, unwritable_spool
):
    """A person has the conversation: the bot stays silent, so no `end` would ever have told the shopper."""
    conversation, token = await database_sync_to_async(_held_conversation)()
    shopper = await ws(f"/ws/chat/?store=demo&resume={token}")
    assert (await shopper.receive())["type"] == "agent_joined"
    await database_sync_to_async(read_only_database.start)()
    await shopper.send({"type": "message", "text": "Hello, anyone?"})
    assert await shopper.receive(60) == {"type": "error", "code": "not_saved", "message": NOT_SAVED,
                                         "text": "Hello, anyone?"}
    assert await database_sync_to_async(Message.objects.filter(conversation=conversation).count)() == 0


async def test_with_only_the_database_read_only_the_message_is_spooled_and_the_answer_ends_normally(
    ws, demo_store, chat_engine, chat_settings, read_only_database, settings, tmp_path
):
    from shop_assistant.chat.log import spool

    settings.CHAT_SPOOL_DIR = tmp_path / "spool"
    settings.CHAT_WRITE_RETRIES = 2
    shopper = await ws()
    await database_sync_to_async(read_only_database.start)()
    answer = await shopper.ask("Do you sell tents?")
    assert answer.end["finish_reason"] in ANSWERED
    assert await shopper.comm.receive_nothing(timeout=1)  # nothing lost, nothing to tell
    # The message kept the moment it came, then what the model saw of it (with its pending answer), then the answer.
    assert spool.depth() == 3
