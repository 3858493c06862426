"""Writing the chat log: conversations, messages and their history.

Blocking (database, broker): async code calls these through ``sync_to_async``.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from catalog.models import Store

from .models import Conversation, Message, hash_token, new_resume_token

logger = logging.getLogger(__name__)

# Publishing gives up quickly: a shopper's websocket must not hang on a dead broker, and the fallback below
# writes the message anyway.
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


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
        return {
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


def write_message(payload: dict[str, Any]) -> Message:
    """Insert or overwrite the message ``payload["id"]`` (idempotent) and touch its conversation."""
    created_at = parse_datetime(payload["created_at"]) or timezone.now()
    with transaction.atomic():
        message, _ = Message.objects.update_or_create(
            id=uuid.UUID(payload["id"]),
            defaults={
                "conversation_id": uuid.UUID(payload["conversation_id"]),
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


def record_message(record: MessageRecord) -> None:
    """Log a message through Celery; if the broker is unreachable, write it here so it is never lost."""
    from .tasks import log_message

    payload = record.payload()
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
    write_message(payload)


# --- conversations ----------------------------------------------------------------------------------------


def default_store(slug: str | None) -> Store | None:
    """The store named by ``slug``, or the first store when no slug is given; None if there is no such store."""
    stores = Store.objects.order_by("pk")
    return stores.filter(slug=slug).first() if slug else stores.first()


def new_conversation(store: Store) -> tuple[Conversation, str]:
    """A new conversation and its resume token (returned once; only its hash is stored)."""
    token = new_resume_token()
    conversation = Conversation.objects.create(store=store, resume_token_hash=hash_token(token))
    return conversation, token


def resume_conversation(token: str, store_slug: str | None) -> Conversation | None:
    """The conversation of ``token``, if it is one and belongs to the store asked for (or no store was named)."""
    if not token or len(token) > 200:
        return None
    conversation = Conversation.objects.select_related("store").filter(resume_token_hash=hash_token(token)).first()
    if conversation is None or (store_slug and conversation.store.slug != store_slug):
        return None
    return conversation


def recent_messages(conversation: Conversation, limit: int) -> list[Message]:
    """The last ``limit`` messages in order."""
    newest = list(Message.objects.filter(conversation=conversation).order_by("-created_at", "-id")[:limit])
    newest.reverse()
    return newest
