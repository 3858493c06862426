"""Writing one message of the chat log: what a message is (``MessageRecord``), its idempotent write, and that
write retried while the database errors.

Blocking (database): async code calls these through ``sync_to_async``. The path of a message, from Celery to the
spool, is ``tasks.record_message``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections, connection, transaction
from django.db.utils import DataError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from shop_assistant.runtime import metrics
from shop_assistant.runtime.retry import retrying
from shop_assistant.runtime.text import clean_value

from .conversations import drafts
from ..models import Conversation, Message

logger = logging.getLogger(__name__)

RETRY_BACKOFF_START = 0.1  # seconds before the second direct-write attempt; doubles each time

# SQLite lets one writer in at a time, and a writer that finds the database locked sleeps in SQLite's busy handler
# (1, 2, 5 ... 100 ms between tries) however soon the lock frees. With twenty shoppers writing at once a message's
# write took 95 ms on average that way (650 ms at worst), and an answer's first text waits for its question's write.
# Within the process the writes take turns on this lock instead, which is handed over at once.
_sqlite_writer = threading.Lock()


@contextmanager
def _one_writer() -> Iterator[None]:
    """The SQLite writer's turn (nothing for other databases, nor inside a caller's transaction, which may hold
    SQLite's lock already: waiting here for a thread that waits for it would deadlock)."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    with _sqlite_writer:
        yield


# Namespace of the ids of shoppers' messages that came with the widget's client id: the same (conversation, client
# id) always names the same row, so a message sent again after a reconnect, or spooled and replayed, is one row.
CLIENT_MESSAGE_NAMESPACE = uuid.UUID("5b0c1f7e-3d4a-4f61-9a8e-0c2f64b1d7a3")


def client_message_id(conversation_id: uuid.UUID, client_id: uuid.UUID) -> uuid.UUID:
    """The row id of the shopper's message ``client_id`` in this conversation (the same on every node)."""
    return uuid.uuid5(CLIENT_MESSAGE_NAMESPACE, f"{conversation_id}:{client_id}")


class NotSavedError(Exception):
    """A message could be written neither to the database nor to the spool: it is gone unless resent."""


@dataclass
class MessageRecord:
    """One message as the consumer knows it; ``payload()`` is what travels to the Celery task."""

    conversation_id: uuid.UUID
    role: str
    text: str
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    model_text: str = ""
    products: list[dict[str, Any]] = field(default_factory=list)
    quotes: list[dict[str, str]] = field(default_factory=list)  # an answer's policy quotes, replayed with history
    agent: str = ""
    finish_reason: str = ""
    usage: dict[str, int] | None = None
    first_token_ms: int | None = None  # an answer's: see Message.first_token_ms
    kind: str = ""  # an answer's: what kind of answer it was (Message.kind)
    created_at: datetime = field(default_factory=timezone.now)
    # A shopper's message being answered: the answer's row is created with it, empty and pending (no finish
    # reason), so that an answer cut by a node's death is seen as such from any node.
    answer_id: uuid.UUID | None = None
    client_id: uuid.UUID | None = None  # a shopper's message: the widget's id for it (``client_message_id``)
    # Insert only, never overwrite: the shopper's message kept the moment it arrives (``keeping``). Its later write
    # (with what the model saw) may land first, and a replay of this one must not undo it.
    keep: bool = False

    def payload(self) -> dict[str, Any]:
        usage = self.usage or {}
        payload = {
            "id": str(self.id),
            "conversation_id": str(self.conversation_id),
            "role": self.role,
            "text": self.text,
            "model_text": self.model_text,
            "products": self.products,
            "quotes": self.quotes,
            "agent": self.agent,
            "finish_reason": self.finish_reason,
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "cached_tokens": usage.get("cached_tokens"),
            "first_token_ms": self.first_token_ms,
            "kind": self.kind,
            "created_at": self.created_at.isoformat(),
        }
        if self.client_id is not None:
            payload["client_id"] = str(self.client_id)
        if self.keep:
            payload["keep"] = True
        if self.answer_id is not None:
            # Just after the question, so the history keeps its order; the answer's own write moves it to its end.
            payload["pending_answer"] = {
                "id": str(self.answer_id),
                "created_at": (self.created_at + timedelta(microseconds=1)).isoformat(),
            }
        draft = drafts.get(self.conversation_id)
        if draft is not None:
            # The conversation's row may not exist yet: whoever writes this message creates it, with what the
            # conversation already knows (a handoff asked for in the first message).
            payload["conversation"] = {
                "store_id": draft.store_id,
                "resume_token_hash": draft.resume_token_hash,
                "status": draft.status,
                "handoff_requested_at": draft.handoff_requested_at.isoformat() if draft.handoff_requested_at else None,
                # What the store's page said (identity.PageContext): the signed customer, the page, the cart.
                "customer": draft.customer,
                "page_url": draft.page_url,
                "cart": draft.cart,
            }
        return clean_value(payload)


def write_message(payload: dict[str, Any]) -> Message:
    """Insert or overwrite the message ``payload["id"]`` (idempotent) and touch its conversation, creating the
    conversation first when the payload carries a draft's fields. A payload marked ``keep`` only inserts."""
    return store_message(payload)[0]


def store_message(payload: dict[str, Any]) -> tuple[Message, bool]:
    """``write_message``, and whether this call created the message's row."""
    payload = clean_value(payload)
    created_at = parse_datetime(payload["created_at"]) or timezone.now()
    conversation_id = uuid.UUID(payload["conversation_id"])
    with _one_writer(), transaction.atomic():
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
                    "customer": draft.get("customer") or {},
                    "page_url": draft.get("page_url") or "",
                    "cart": draft.get("cart") or [],
                },
            )
            if not created and handoff_at is not None:  # an earlier message of the draft created the row
                Conversation.objects.filter(
                    pk=conversation_id, handoff_requested_at__isnull=True, status=Conversation.Status.BOT
                ).update(status=Conversation.Status.HANDOFF, handoff_requested_at=handoff_at)
        fields: dict[str, Any] = {
            "conversation_id": conversation_id,
            "role": payload["role"],
            "text": payload.get("text", ""),
            "model_text": payload.get("model_text", ""),
            "products": payload.get("products") or [],
            "quotes": payload.get("quotes") or [],
            "agent": payload.get("agent", ""),
            "finish_reason": payload.get("finish_reason", ""),
            "prompt_tokens": payload.get("prompt_tokens"),
            "completion_tokens": payload.get("completion_tokens"),
            "cached_tokens": payload.get("cached_tokens"),
            "first_token_ms": payload.get("first_token_ms"),
            "kind": payload.get("kind") or "",
            "created_at": created_at,
        }
        if payload.get("client_id"):  # only when given: a later write of the same message never clears it
            fields["client_id"] = uuid.UUID(payload["client_id"])
        store = Message.objects.get_or_create if payload.get("keep") else Message.objects.update_or_create
        message, created = store(id=uuid.UUID(payload["id"]), defaults=fields)
        pending = payload.get("pending_answer")
        if pending:
            # Created only: when the answer's own write came first (tasks run out of order), it stays as it is.
            Message.objects.get_or_create(
                id=uuid.UUID(pending["id"]),
                defaults={
                    "conversation_id": conversation_id,
                    "role": Message.Role.ASSISTANT,
                    "created_at": parse_datetime(pending["created_at"]) or created_at,
                },
            )
        Conversation.objects.filter(pk=message.conversation_id, last_activity_at__lt=created_at).update(
            last_activity_at=created_at
        )
    return message, created


def answered(message: Message) -> bool:
    """Blocking (database). The shopper's message has an answer that ended (not one in progress, nor one a
    node's death cut): a message sent again is then acknowledged, not answered twice."""
    return (
        Message.objects.filter(
            conversation_id=message.conversation_id, role=Message.Role.ASSISTANT, created_at__gt=message.created_at
        )
        .exclude(finish_reason__in=("", Message.FinishReason.INTERRUPTED))
        .exists()
    )


def _worth_retrying(error: BaseException) -> bool:
    # A row the database refuses (integrity, bad data) is refused again: waiting will not help.
    return isinstance(error, DatabaseError) and not isinstance(error, (IntegrityError, DataError))


def write_with_retry(
    payload: dict[str, Any], attempts: int | None = None, write: Callable[[dict[str, Any]], Any] = write_message
) -> Any:
    """``write`` (``write_message``), retried with exponential backoff while the database errors; the last error
    is raised."""

    def before_retry(attempt: int, error: BaseException) -> None:
        metrics.LOG_WRITE_RETRIES.inc()
        logger.warning("chat message %s: database write failed (attempt %d); retrying", payload["id"], attempt)
        if not connection.in_atomic_block:  # inside a caller's transaction, closing would break it
            close_old_connections()  # a broken connection is replaced, not reused

    policy = retrying(
        retry_on=_worth_retrying,
        attempts=attempts or settings.CHAT_WRITE_RETRIES or 1,
        first_wait=RETRY_BACKOFF_START,
        before_retry=before_retry,
    )
    return policy(write, payload)
