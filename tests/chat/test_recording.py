"""The chat log: idempotent writes, and no message lost when the Celery broker is down."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from django.db import connection, connections

from catalog.models import Store
from shop_assistant.chat.models import Conversation, Message
from shop_assistant.chat.log.conversations import new_conversation, recent_messages
from shop_assistant.chat.log.tasks import record_message
from shop_assistant.chat.log import writes
from shop_assistant.chat.log.writes import MessageRecord, write_message
from tests.conftest import REPO_ROOT

from .conftest import free_port, subprocess_env


def test_a_redelivered_task_writes_the_same_row_again(db):
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = new_conversation(store)
    record = MessageRecord(conversation.id, "assistant", "first", finish_reason="length",
                           usage={"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": 0})
    write_message(record.payload())
    write_message(record.payload())  # acks_late redelivery
    assert Message.objects.count() == 1
    message = Message.objects.get()
    assert (message.text, message.finish_reason, message.prompt_tokens) == ("first", "length", 10)
    conversation.refresh_from_db()
    assert conversation.last_activity_at == record.created_at


def test_an_answer_row_keeps_what_kind_of_answer_it_was(db):
    """Message.kind travels with the message (the Celery task's and the spool's payload) and a later write of the
    same row keeps what it says; a shopper's message has none."""
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = new_conversation(store)
    question = MessageRecord(conversation.id, "user", "¿Tienen chaquetas impermeables?")
    answer = MessageRecord(conversation.id, "assistant", "Lo siento, no he entendido tu mensaje.",
                           finish_reason="fixed", kind="not_understood")
    assert answer.payload()["kind"] == "not_understood"
    record_message(question)
    record_message(answer)
    assert dict(Message.objects.values_list("role", "kind")) == {"user": "", "assistant": "not_understood"}


def test_eager_celery_logs_in_order(db):
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = new_conversation(store)
    for i in range(3):
        record_message(MessageRecord(conversation.id, "user" if i % 2 == 0 else "assistant", f"m{i}"))
    assert [m.text for m in recent_messages(conversation, 10)] == ["m0", "m1", "m2"]
    assert [m.text for m in recent_messages(conversation, 2)] == ["m1", "m2"]


def test_an_unreachable_broker_still_gets_the_message_written(transactional_db):
    """With REDIS_URL pointing at a port nobody listens on, record_message falls back to a direct write."""
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = new_conversation(store)
    dead_broker = f"redis://127.0.0.1:{free_port()}/0"
    code = (
        "import uuid;"
        "from shop_assistant.chat.log.writes import MessageRecord; from shop_assistant.chat.log.tasks import record_message;"
        f"record_message(MessageRecord(uuid.UUID('{conversation.id}'), 'user', 'lost? never'))"
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO_ROOT,
        env=subprocess_env(REDIS_URL=dead_broker, ENGINE_AUTOSTART="0"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "writing it directly" in result.stderr  # the warning in the log
    assert Message.objects.filter(conversation=conversation, text="lost? never").exists()
    assert elapsed < 60  # gave up on the broker quickly instead of hanging the websocket
    assert Conversation.objects.count() == 1


def test_on_sqlite_a_write_waits_for_its_turn_and_goes_as_soon_as_the_writer_before_it_is_done(transactional_db):
    """The process's writes take turns on a lock (``writes._one_writer``), not in SQLite's busy handler, which
    sleeps up to 100 ms a try however soon the database frees."""
    if connection.vendor != "sqlite":
        pytest.skip("the turns are SQLite's: other databases take concurrent writes")
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = new_conversation(store)
    record = MessageRecord(conversation.id, "user", "my turn?")

    def write() -> None:
        try:
            write_message(record.payload())
        finally:
            connections.close_all()

    worker = threading.Thread(target=write)
    with writes._one_writer():  # another write holds the turn
        worker.start()
        worker.join(0.3)
        assert worker.is_alive() and not Message.objects.filter(pk=record.id).exists()
        freed = time.perf_counter()
    worker.join(10)
    assert not worker.is_alive() and Message.objects.filter(pk=record.id).exists()
    assert time.perf_counter() - freed < 1.0
