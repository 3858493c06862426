"""No chat message is ever lost: concurrent writers, a database that errors or is down, text no database takes.

Faults are injected at the database driver (``connection.execute_wrapper``), so the code under test runs
exactly as in production: Celery (eager here), the direct write, its retries, the spool and its replay.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import OperationalError, close_old_connections, connection

from catalog.models import Store
from shop_assistant.chat.log import spool
from shop_assistant.runtime import metrics
from shop_assistant.chat.models import Conversation, Message
from shop_assistant.chat.log.conversations import draft_conversation, recent_messages, resume_conversation
from shop_assistant.chat.log.tasks import record_message
from shop_assistant.chat.log.writes import MessageRecord


@pytest.fixture
def spool_dir(settings, tmp_path):
    settings.CHAT_SPOOL_DIR = tmp_path / "spool"
    settings.CHAT_WRITE_RETRIES = 3
    return settings.CHAT_SPOOL_DIR


class FailingWrites:
    """Makes the next ``failures`` INSERT/UPDATE statements on this thread's connection fail as if the
    database were gone (``None``: all of them)."""

    def __init__(self, failures: int | None) -> None:
        self.failures = failures
        self.failed = 0

    def __call__(self, execute, sql, params, many, context):
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE")) and (
            self.failures is None or self.failed < self.failures
        ):
            self.failed += 1
            raise OperationalError("server closed the connection unexpectedly (injected)")
        return execute(sql, params, many, context)


def test_ten_shoppers_at_once_all_get_their_first_message_stored(transactional_db, spool_dir):
    """Ten new conversations, each written with its first message at the same moment (SQLite: WAL, immediate
    transactions and a busy timeout; before, every one failed with "database is locked")."""
    store = Store.objects.create(slug="s", name="S")
    drafts = [draft_conversation(store) for _ in range(10)]
    barrier = threading.Barrier(10)
    errors: list[BaseException] = []
    retries_before = metrics.LOG_WRITE_RETRIES._value.get()

    def shopper(index: int) -> None:
        try:
            conversation = drafts[index][0]
            barrier.wait()
            for turn in range(3):
                record_message(MessageRecord(conversation.id, "user", f"shopper {index} turn {turn}"))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=shopper, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert spool.depth() == 0  # written, not merely spooled
    assert metrics.LOG_WRITE_RETRIES._value.get() == retries_before  # not one "database is locked" on the way
    assert Conversation.objects.count() == 10
    assert Message.objects.count() == 30
    for conversation, token in drafts:
        stored = Conversation.objects.get(pk=conversation.id)
        assert stored.resume_token_hash == conversation.resume_token_hash
        assert resume_conversation(token, "s") == stored


def test_a_draft_conversation_has_no_row_until_its_first_message(db, spool_dir):
    store = Store.objects.create(slug="s", name="S")
    conversation, token = draft_conversation(store)
    assert Conversation.objects.count() == 0
    assert recent_messages(conversation, 10) == []
    record_message(MessageRecord(conversation.id, "user", "hello"))
    assert Conversation.objects.get().pk == conversation.id
    assert [m.text for m in recent_messages(resume_conversation(token, None), 10)] == ["hello"]


def test_a_database_that_errors_briefly_is_retried_with_backoff(db, spool_dir):
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = draft_conversation(store)
    retries_before = metrics.LOG_WRITE_RETRIES._value.get()
    faults = FailingWrites(failures=3)  # the Celery (eager) attempt, then two direct attempts fail
    with connection.execute_wrapper(faults):
        record_message(MessageRecord(conversation.id, "user", "are you there?"))
    assert faults.failed == 3
    assert Message.objects.get().text == "are you there?"
    assert metrics.LOG_WRITE_RETRIES._value.get() - retries_before == 2
    assert spool.depth() == 0


def test_a_database_that_is_down_spools_the_message_and_replays_it(db, spool_dir):
    store = Store.objects.create(slug="s", name="S")
    conversation, token = draft_conversation(store)
    record = MessageRecord(conversation.id, "user", "keep me")
    with connection.execute_wrapper(FailingWrites(failures=None)):
        record_message(record)  # no exception: the shopper's answer must not depend on the database
        record_message(MessageRecord(conversation.id, "assistant", "and me", finish_reason="stop"))
    assert Message.objects.count() == 0
    assert spool.depth() == 2
    assert (spool_dir / "messages.jsonl").read_text().count("keep me") == 1

    # The database is back: the next successful write replays the spool, in order, creating the conversation.
    record_message(MessageRecord(conversation.id, "user", "third"))
    assert spool.depth() == 0
    texts = [m.text for m in recent_messages(resume_conversation(token, "s"), 10)]
    assert sorted(texts) == ["and me", "keep me", "third"]
    assert Message.objects.get(pk=record.id).text == "keep me"
    assert spool.replay() == 0  # idempotent: nothing left, nothing doubled
    assert Message.objects.count() == 3


def test_replay_stops_while_the_database_is_down_and_keeps_every_line(db, spool_dir):
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = draft_conversation(store)
    for i in range(3):
        spool.append(MessageRecord(conversation.id, "user", f"m{i}").payload())
    with connection.execute_wrapper(FailingWrites(failures=None)):
        assert spool.replay() == 0
    assert spool.depth() == 3
    assert spool.replay() == 3
    assert sorted(m.text for m in Message.objects.all()) == ["m0", "m1", "m2"]


@pytest.mark.parametrize(
    ("text", "stored"),
    [("nul\x00byte", "nulbyte"), ("lone \ud800 surrogate", "lone \ufffd surrogate"), ("\udfff\x00", "\ufffd")],
)
def test_text_no_database_takes_is_cleaned_not_dropped(db, spool_dir, text, stored):
    """PostgreSQL refuses NUL (DataError) and no database encodes a lone surrogate: cleaned at the boundary."""
    store = Store.objects.create(slug="s", name="S")
    conversation, _ = draft_conversation(store)
    record = MessageRecord(conversation.id, "user", text, model_text=text, products=[{"title": text}])
    record_message(record)
    message = Message.objects.get(pk=record.id)
    assert (message.text, message.model_text, message.products) == (stored, stored, [{"title": stored}])
    assert spool.depth() == 0


def test_the_log_task_survives_a_lost_worker_and_a_down_database():
    from shop_assistant.chat.log.tasks import log_message

    assert log_message.acks_late is True
    assert log_message.reject_on_worker_lost is True
    assert log_message.max_retries >= 5


def test_a_message_for_an_unknown_conversation_is_kept_aside_not_dropped(transactional_db, spool_dir):
    payload = MessageRecord(uuid.uuid4(), "user", "orphan").payload()
    spool.append(payload)
    assert spool.replay() == 0
    assert spool.depth() == 0
    assert "orphan" in (spool_dir / "rejected.jsonl").read_text()
