"""Writing the chat log: conversations, messages and their history. Nothing said is ever lost.

Blocking (database, broker): async code calls these through ``sync_to_async``.

The path of one message: Celery (a worker writes it; acks_late, so a worker killed mid-task gets it
redelivered); if the broker cannot be reached, a direct write here, retried with backoff; if the database is
down too, a line in a local spool file (``settings.CHAT_SPOOL_DIR``) that is replayed as soon as a write works
again (after the next successful write, by a background thread of the web process, or by
``manage.py replay_chat_spool``). Every write is idempotent (keyed by the message id), so a replay or a
redelivery never makes a copy.

A new conversation is a draft until its first message: the row is created together with that message, so a
connection where nothing is said leaves nothing in the database.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.utils import DataError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from catalog.models import Store

from shop_assistant.runtime import metrics
from .models import Conversation, Message, hash_token, new_resume_token

logger = logging.getLogger(__name__)

# Publishing gives up quickly: a shopper's websocket must not hang on a dead broker, and the fallback below
# writes the message anyway.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
RETRY_BACKOFF_START = 0.1  # seconds before the second direct-write attempt; doubles each time

# Draft conversations of this process, by id: the session holds the object; once it is gone, so is the entry.
_drafts: weakref.WeakValueDictionary[uuid.UUID, Conversation] = weakref.WeakValueDictionary()
# The same drafts by resume-token hash: a second tab resuming a draft joins it (within this process).
_drafts_by_hash: weakref.WeakValueDictionary[str, Conversation] = weakref.WeakValueDictionary()


# --- the boundary: text every database takes -------------------------------------------------------------


def clean_text(text: str) -> str:
    """``text`` without NUL characters (PostgreSQL refuses them) and with lone surrogates (not Unicode; a JSON
    frame can carry ``"\\ud800"``) replaced by U+FFFD, so the message is stored and tokenized, never dropped."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


@dataclass
class MessageRecord:
    """One message as the consumer knows it; ``payload()`` is what travels to the Celery task."""

    conversation_id: uuid.UUID
    role: str
    text: str
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    model_text: str = ""
    products: list[dict[str, Any]] = field(default_factory=list)
    agent: str = ""
    finish_reason: str = ""
    usage: dict[str, int] | None = None
    created_at: datetime = field(default_factory=timezone.now)

    def payload(self) -> dict[str, Any]:
        usage = self.usage or {}
        payload = {
            "id": str(self.id),
            "conversation_id": str(self.conversation_id),
            "role": self.role,
            "text": self.text,
            "model_text": self.model_text,
            "products": self.products,
            "agent": self.agent,
            "finish_reason": self.finish_reason,
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "cached_tokens": usage.get("cached_tokens"),
            "created_at": self.created_at.isoformat(),
        }
        draft = _drafts.get(self.conversation_id)
        if draft is not None:
            # The conversation's row may not exist yet: whoever writes this message creates it, with what the
            # conversation already knows (a handoff asked for in the first message).
            payload["conversation"] = {
                "store_id": draft.store_id,
                "resume_token_hash": draft.resume_token_hash,
                "status": draft.status,
                "handoff_requested_at": draft.handoff_requested_at.isoformat() if draft.handoff_requested_at else None,
            }
        return _clean(payload)


def write_message(payload: dict[str, Any]) -> Message:
    """Insert or overwrite the message ``payload["id"]`` (idempotent) and touch its conversation, creating the
    conversation first when the payload carries a draft's fields."""
    payload = _clean(payload)
    created_at = parse_datetime(payload["created_at"]) or timezone.now()
    conversation_id = uuid.UUID(payload["conversation_id"])
    with transaction.atomic():
        draft = payload.get("conversation")
        if draft:
            handoff_at = parse_datetime(draft["handoff_requested_at"]) if draft.get("handoff_requested_at") else None
            _, created = Conversation.objects.get_or_create(
                id=conversation_id,
                defaults={
                    "store_id": draft["store_id"],
                    "resume_token_hash": draft["resume_token_hash"],
                    "status": draft.get("status") or Conversation.Status.BOT,
                    "handoff_requested_at": handoff_at,
                },
            )
            if not created and handoff_at is not None:  # an earlier message of the draft created the row
                Conversation.objects.filter(pk=conversation_id, handoff_requested_at__isnull=True).update(
                    status=Conversation.Status.HANDOFF, handoff_requested_at=handoff_at
                )
        message, _ = Message.objects.update_or_create(
            id=uuid.UUID(payload["id"]),
            defaults={
                "conversation_id": conversation_id,
                "role": payload["role"],
                "text": payload.get("text", ""),
                "model_text": payload.get("model_text", ""),
                "products": payload.get("products") or [],
                "agent": payload.get("agent", ""),
                "finish_reason": payload.get("finish_reason", ""),
                "prompt_tokens": payload.get("prompt_tokens"),
                "completion_tokens": payload.get("completion_tokens"),
                "cached_tokens": payload.get("cached_tokens"),
                "created_at": created_at,
            },
        )
        Conversation.objects.filter(pk=message.conversation_id, last_activity_at__lt=created_at).update(
            last_activity_at=created_at
        )
    return message


def write_with_retry(payload: dict[str, Any], attempts: int | None = None) -> Message:
    """``write_message``, retried with exponential backoff while the database errors; the last error is raised."""
    from django.db import close_old_connections, connection

    attempts = attempts or settings.CHAT_WRITE_RETRIES or 1
    delay = RETRY_BACKOFF_START
    for attempt in range(1, attempts + 1):
        try:
            return write_message(payload)
        except (IntegrityError, DataError):
            raise  # the row itself is wrong; waiting will not help
        except DatabaseError:
            if attempt == attempts:
                raise
            metrics.LOG_WRITE_RETRIES.inc()
            logger.warning("chat message %s: database write failed (attempt %d); retrying", payload["id"], attempt)
            time.sleep(delay)
            delay *= 2
            if not connection.in_atomic_block:  # inside a caller's transaction, closing would break it
                close_old_connections()  # a broken connection is replaced, not reused
    raise AssertionError("unreachable")


# --- the spool: messages waiting for the database ---------------------------------------------------------


def spool_path() -> Path:
    return Path(settings.CHAT_SPOOL_DIR) / "messages.jsonl"


@contextmanager
def _spool_lock() -> Iterator[None]:
    """One writer or replayer at a time, across processes on this machine (the worker and daphne)."""
    path = spool_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class NotSavedError(Exception):
    """A message could be written neither to the database nor to the spool: it is gone unless resent."""


def spool(payload: dict[str, Any]) -> None:
    """Append the payload durably (fsync) to the spool; OSError when the spool cannot be written."""
    line = json.dumps(payload, ensure_ascii=True) + "\n"
    with _spool_lock():
        with open(spool_path(), "a", encoding="ascii") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
    metrics.SPOOLED.inc()


def check_spool() -> None:
    """Raise OSError unless a message could be spooled now: opens what ``spool`` opens, writes nothing."""
    with _spool_lock():
        with open(spool_path(), "a", encoding="ascii"):
            pass


def spool_depth() -> int:
    """Messages waiting in the spool."""
    try:
        with open(spool_path(), "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except (FileNotFoundError, NotADirectoryError):  # no spool file can exist there: nothing waits
        return 0


metrics.SPOOL_DEPTH.set_function(spool_depth)


def replay_spool() -> int:
    """Write the spooled messages, oldest first; stops at the first database error and keeps the rest.

    A line the database refuses for good (integrity, bad data) moves to ``rejected.jsonl`` next to the spool,
    so it neither blocks the others nor disappears. Returns how many were written.
    """
    written = 0
    with _spool_lock():
        path = spool_path()
        try:
            lines = [line for line in path.read_text(encoding="ascii").splitlines() if line.strip()]
        except FileNotFoundError:
            return 0
        remaining = list(lines)
        for line in lines:
            payload = json.loads(line)
            try:
                write_message(payload)
            except (IntegrityError, DataError) as exc:
                logger.error("spooled chat message %s refused by the database: %s", payload.get("id"), exc)
                with open(path.with_name("rejected.jsonl"), "a", encoding="ascii") as rejected:
                    rejected.write(line + "\n")
            except DatabaseError as exc:
                logger.warning("replaying the chat spool stopped, database still unavailable: %s", exc)
                break
            else:
                written += 1
            remaining.pop(0)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in remaining), encoding="ascii")
        os.replace(tmp, path)  # atomic: a crash mid-replay leaves the old file, and rewrites are idempotent
    if written:
        logger.info("replayed %d spooled chat messages", written)
    return written


_replayer: threading.Thread | None = None


def start_spool_replayer(interval: float = 10.0) -> None:
    """A daemon thread that replays the spool every ``interval`` seconds while it holds anything (idempotent)."""
    global _replayer
    if _replayer is not None and _replayer.is_alive():
        return

    def loop() -> None:
        from django.db import close_old_connections

        while True:
            time.sleep(interval)
            try:
                if spool_depth():
                    close_old_connections()
                    replay_spool()
            except Exception:  # noqa: BLE001 - the loop must outlive any one failure
                logger.exception("chat spool replay failed")

    _replayer = threading.Thread(target=loop, name="chat-spool-replayer", daemon=True)
    _replayer.start()


# --- conversations ----------------------------------------------------------------------------------------


def default_store(slug: str | None) -> Store | None:
    """The store named by ``slug``, or the first store when no slug is given; None if there is no such store."""
    stores = Store.objects.order_by("pk")
    return stores.filter(slug=slug).first() if slug else stores.first()


def new_conversation(store: Store) -> tuple[Conversation, str]:
    """A new conversation, saved now, and its resume token (returned once; only its hash is stored)."""
    token = new_resume_token()
    conversation = Conversation.objects.create(store=store, resume_token_hash=hash_token(token))
    return conversation, token


def draft_conversation(store: Store) -> tuple[Conversation, str]:
    """A new conversation that is saved with its first message (see ``MessageRecord.payload``), and its token.

    The caller must keep the object while the conversation is open: the draft is known by it.
    """
    token = new_resume_token()
    conversation = Conversation(store=store, resume_token_hash=hash_token(token), created_at=timezone.now())
    _drafts[conversation.id] = conversation
    _drafts_by_hash[conversation.resume_token_hash] = conversation
    return conversation, token


def resume_conversation(token: str, store_slug: str | None) -> Conversation | None:
    """The conversation of ``token``, if it is one and belongs to the store asked for (or no store was named)."""
    if not token or len(token) > 200:
        return None
    token_hash = hash_token(token)
    conversation = Conversation.objects.select_related("store").filter(resume_token_hash=token_hash).first()
    if conversation is None:
        conversation = _drafts_by_hash.get(token_hash)  # nothing said yet, so no row yet
    if conversation is None or (store_slug and conversation.store.slug != store_slug):
        return None
    return conversation


def recent_messages(conversation: Conversation, limit: int) -> list[Message]:
    """The last ``limit`` messages in order (none for a draft)."""
    if conversation.id in _drafts and conversation._state.adding:
        return []
    newest = list(Message.objects.filter(conversation=conversation).order_by("-created_at", "-id")[:limit])
    newest.reverse()
    return newest
