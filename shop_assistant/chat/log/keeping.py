"""Keeping the chat's messages within a deadline: in the database when it answers in time, else in the spool.

The chat's writes run on threads of their own (``WRITERS``), never on the event loop nor on the pool where answers
are planned, and a session waits for one at most ``settings.CHAT_WRITE_TIMEOUT`` seconds. A database that hangs
(SQLite locked by another process, a stuck PostgreSQL) costs the shopper that long once; then the message goes to
the spool (fsynced, replayed once writes work: ``spool.replay``) and the answer goes on, so one stuck write never
stops the other conversations. A write given up on is not undone: if it finishes later the replay writes the same
row again (every write is keyed by the message id), and the message is spooled at most once (``Job``).

``keep`` is the first thing done with a shopper's message, before it is answered: the widget's `ack` says it is
kept, and a message the widget sends again (its outbox, after a reconnect) is found by its client id.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError, close_old_connections

from ..protocol import events
from . import spool
from .tasks import record_message
from .writes import MessageRecord, NotSavedError, answered, store_message, write_with_retry

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Enough for the writes of many sessions at once (each a few ms); a hung database holds some of them, and a write
# that waits here past its deadline is not started at all: it is spooled instead.
WRITERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="chat-write")


class Job:
    """One message's write: spooled at most once, by whichever side gives up first (the session at its deadline,
    or the write itself when the database fails)."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        self._lock = threading.Lock()
        self.spooled = False

    def spool(self, payload: dict[str, Any] | None = None) -> None:
        """Blocking (file, fsync). OSError when the spool cannot be written."""
        with self._lock:
            if not self.spooled:
                spool.append(payload or self.payload)
                self.spooled = True


@dataclass
class Kept:
    """Where a shopper's message is, right after it arrived."""

    stored: bool  # in the database now (else spooled: written when the spool is replayed)
    new: bool = True  # this message was not stored before (False: sent again, already kept)
    answered: bool = False  # sent again, and its answer had ended: it is not answered twice
    held: bool | None = None  # a person has the conversation (None: not known, the database did not answer)
    content: str = ""  # sent again: what the model saw of it, as the history holds it


def _on_thread(work: Callable[[], T]) -> T:
    close_old_connections()  # as channels' database_sync_to_async: a broken connection is replaced, not reused
    try:
        return work()
    finally:
        close_old_connections()


_in_flight: set[Future[Any]] = set()  # writes handed to WRITERS and not finished (nor cancelled before they began)


def in_flight() -> int:
    """Writes still going on, those a deadline gave up on included (a hung database shows here)."""
    return len(_in_flight)


async def within_deadline(work: Callable[[], T], timeout: float | None = None) -> T:
    """``work`` on a writer thread; asyncio.TimeoutError after ``timeout``. A write that has not begun by then is
    cancelled; one that has goes on (each is idempotent)."""
    future = WRITERS.submit(_on_thread, work)
    _in_flight.add(future)
    future.add_done_callback(_in_flight.discard)
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout or settings.CHAT_WRITE_TIMEOUT)


async def keep(record: MessageRecord) -> Kept:
    """Make the shopper's message durable now: its row inserted (never overwritten: ``MessageRecord.keep``), or
    the spool. A message whose row exists already (the same client id, sent again) is reported as such.
    ``NotSavedError`` when neither the database nor the spool took it."""
    record.keep = True
    payload = record.payload()
    job = Job(payload)

    def work() -> Kept:
        try:
            message, created = write_with_retry(payload, write=store_message)
        except DatabaseError as exc:
            logger.error("chat message %s: database unavailable (%s); spooled to disk", record.id, exc)
            job.spool()
            return Kept(stored=False)
        return Kept(
            stored=True,
            new=created,
            answered=not created and answered(message),
            held=events.is_held(record.conversation_id),
            content=message.model_text or message.text,
        )

    try:
        return await within_deadline(work)
    except asyncio.TimeoutError:
        logger.error(
            "chat message %s: the database did not answer in %.1f s; spooled, the answer goes on",
            record.id, settings.CHAT_WRITE_TIMEOUT,
        )
    except OSError as exc:
        raise NotSavedError(f"database unavailable and spool unwritable: {exc}") from exc
    try:
        await asyncio.to_thread(job.spool)  # not on WRITERS: they may all be waiting for the database
    except OSError as exc:
        raise NotSavedError(f"database too slow and spool unwritable: {exc}") from exc
    return Kept(stored=False)


async def record(record: MessageRecord) -> bool:
    """``tasks.record_message`` (Celery, else the database, else the spool) within the deadline; past it, the
    spool. False when the message could be saved nowhere."""
    job = Job(record.payload())
    try:
        await within_deadline(lambda: record_message(record, spool_append=job.spool))
        return True
    except asyncio.TimeoutError:
        logger.error("chat message %s: the database did not answer in time; spooled", record.id)
    except Exception:
        # The shopper still gets the answer, but must learn it is not kept: a resume would show a gap.
        logger.exception("chat message %s could not be saved", record.id)
        return False
    try:
        await asyncio.to_thread(job.spool)
    except OSError:
        logger.exception("chat message %s could not be saved (spool unwritable)", record.id)
        return False
    return True
