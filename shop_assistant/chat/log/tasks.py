"""Celery tasks that write the chat log.

Run eagerly in the embedded default, by a worker process in the full stack. Callers go through
``record_message`` below, which writes directly when the broker cannot be reached.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.db import DatabaseError, IntegrityError
from django.db.utils import DataError

from shop_assistant.runtime import metrics

from . import spool
from .writes import MessageRecord, NotSavedError, write_message, write_with_retry

logger = logging.getLogger(__name__)

# Publishing gives up quickly: a shopper's websocket must not hang on a dead broker, and the fallback below
# writes the message anyway.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}

# The worker retries a failing database with backoff (1, 2, 4 … 60 s) this many times, then spools the message
# on its own machine (replayed after its next successful write); it is never acked away unwritten.
MAX_DATABASE_RETRIES = 8


@shared_task(
    bind=True,
    name="chat.log_message",
    acks_late=True,  # acked after the write: a worker that dies mid-task has not consumed the message
    reject_on_worker_lost=True,  # a killed pool child puts the message back at once (not after visibility_timeout)
    ignore_result=True,
    max_retries=MAX_DATABASE_RETRIES,
)
def log_message(self: Any, payload: dict[str, Any]) -> str:
    # Idempotent (keyed by the message id), so an acks_late redelivery writes the same row again, not a copy.
    try:
        message = write_message(payload)
    except (IntegrityError, DataError):
        if self.request.is_eager:
            raise
        spool.append(payload)  # kept (and later moved to rejected.jsonl), never silently dropped
        raise
    except DatabaseError as exc:
        if self.request.is_eager:
            raise  # the caller retries and spools in its own process
        if self.request.retries >= MAX_DATABASE_RETRIES:
            logger.error("chat message %s: database still down after retries; spooled", payload.get("id"))
            spool.append(payload)
            return ""
        metrics.LOG_WRITE_RETRIES.inc()
        raise self.retry(exc=exc, countdown=min(60, 2**self.request.retries)) from exc
    if spool.depth():
        spool.replay()
    return str(message.pk)


def record_message(record: MessageRecord, spool_append: Callable[[dict[str, Any]], None] = spool.append) -> None:
    """Log a message through Celery; if the broker is unreachable, write it here (retried), and if the database
    is down too, spool it to a local file that is replayed later. It is never dropped silently: when the spool
    cannot be written either, ``writes.NotSavedError`` is raised (the chat tells the shopper).

    ``spool_append``: how to spool it (``keeping.Job`` spools a message at most once, whoever gives up first)."""
    payload = record.payload()
    metrics.MESSAGES.labels(role=record.role).inc()
    try:
        log_message.apply_async(args=[payload], retry=True, retry_policy=PUBLISH_RETRY_POLICY)
        return
    except Exception as exc:  # kombu's OperationalError, redis errors, or (eager mode) the write itself
        logger.warning(
            "could not queue chat message %s through Celery (%s: %s); writing it directly",
            payload["id"],
            type(exc).__name__,
            exc,
        )
    try:
        write_with_retry(payload)
    except DatabaseError as exc:
        try:
            spool_append(payload)
        except OSError as spool_exc:
            logger.error(
                "chat message %s NOT saved: database unavailable (%s) and spool unwritable (%s)",
                payload["id"], exc, spool_exc,
            )
            raise NotSavedError(f"database: {exc}; spool: {spool_exc}") from spool_exc
        logger.error("chat message %s: database unavailable (%s); spooled to disk", payload["id"], exc)
        return
    if spool.depth():
        spool.replay()
